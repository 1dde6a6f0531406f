"""Every example in examples/ runs with its one command, in a fresh directory, and does what
its README says: the support ticket waits for a supervisor; the slow export survives its
worker's SIGKILL with one job made; the model-backed agent uses a model when one answers
(a local server speaking the OpenAI chat-completions protocol) and rules when none does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..wire import Reply, StubServer, running

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-12-01T10:00:00"


def run(example: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """``python examples/EXAMPLE/run.py`` in ``cwd``; its output (it asserts its own end)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAYSTATE_MODEL")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example / "run.py")],
        cwd=cwd,
        env={**clean, "RELAYSTATE_NOW": NOW, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_support_ticket_waits_for_its_supervisor(tmp_path: Path) -> None:
    out = run("support_ticket", tmp_path)
    assert "is with a colleague now, for its approval" in out
    assert "ada cannot approve it herself: slot 'approval' is filled by an operator" in out
    assert "sam approves: done" in out and "opened TIC-00001 for ada@example.com" in out
    assert "Reference: TIC-00002" in out  # bob's normal ticket went straight through
    assert "ticket system: 2 tickets, effects per key [1, 1]" in out


def test_the_slow_export_survives_its_worker(tmp_path: Path) -> None:
    out = run("long_running", tmp_path)
    assert "worker A killed mid-export; the Action is running" in out
    assert out.count("job service: 1 export started") == 2
    assert "reconciled export: pending (JOB-00001 is still running)" in out
    assert "reconciled export: succeeded" in out
    assert "stopped on SIGTERM (exit 0)" in out


def test_without_a_model_the_rules_do_the_understanding(tmp_path: Path) -> None:
    out = run("llm_agent", tmp_path)
    assert "understanding and replies: rules only" in out
    assert "(the rules cannot count that; she says it again)" in out
    assert "Reference: BOO-00001" in out


def fake_model(body: dict[str, Any]) -> Reply:
    """What a model answers: a count of the people said in words, and replies reworded."""
    system, said = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You extract values"):
        fields = body["response_format"]["json_schema"]["schema"]["properties"]
        values: dict[str, Any] = dict.fromkeys(fields)
        if "Mulder and Skinner" in said:
            values["people"] = 3
        return Reply(completion(json.dumps(values)))
    if system.startswith("Rewrite the assistant reply"):
        return Reply(completion(f"Certainly. {said}"))
    return Reply({"error": {"message": "not scripted"}}, 400)


def completion(content: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    return {"object": "chat.completion", "choices": [{**choice, "finish_reason": "stop"}]}


def model_env(server: StubServer) -> dict[str, str]:
    return {"RELAYSTATE_MODEL_BASE_URL": server.url, "RELAYSTATE_MODEL_NAME": "test-model"}


def test_with_a_model_it_understands_more_and_rewords_every_reply(tmp_path: Path) -> None:
    with running(fake_model) as server:
        out = run("llm_agent", tmp_path, model_env(server))
    assert "understanding and replies: the model" in out
    assert "(the rules cannot count that" not in out  # the model counted them
    assert "dana> me, Mulder and Skinner\nrelaystate> Certainly. Under which name?" in out
    assert "Certainly. Done: your table booking is complete. Reference: BOO-00001." in out
    asked = [r.body["messages"][0]["content"].split()[:2] for r in server.received]
    assert ["You", "extract"] in asked and ["Rewrite", "the"] in asked
    assert all(r.path == "/v1/chat/completions" for r in server.received)


def test_a_model_that_fails_leaves_the_rules_in_charge(tmp_path: Path) -> None:
    def broken(body: dict[str, Any]) -> Reply:
        return Reply(b"<html>502 Bad Gateway</html>", 502)

    with running(broken) as server:
        out = run("llm_agent", tmp_path, model_env(server))
    assert "understanding and replies: the model" in out
    assert "(the rules cannot count that; she says it again)" in out
    assert "Reference: BOO-00001" in out and "Certainly" not in out
