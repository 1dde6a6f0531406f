"""The command line, run as a real process: JSON output, and bad input as one line + exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.demo import templates

from .support import cli


@pytest.fixture
def booked(tmp_path: Path) -> tuple[str, str]:
    """A store with one open and one finished flight booking for alice."""
    url = f"sqlite:///{tmp_path}/cli.db"
    with Runtime(open_store(url), templates(tmp_path / "cli-ledger.db")) as rt:
        open_id = rt.start(
            Scope.user("alice"), "flight_booking", slots={"origin": "Beijing"}
        ).task.id
        done = rt.start(
            Scope.user("alice"),
            "flight_booking",
            slots={
                "origin": "Beijing",
                "destination": "Shanghai",
                "date": "2027-01-22",
                "cabin_class": "economy",
                "passenger_name": "Alice",
            },
        )
        rt.confirm(Scope.user("alice"), done.task.id)
    return url, open_id


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_list_show_history_and_resume(booked: tuple[str, str], tmp_path: Path) -> None:
    url, open_id = booked
    listed = as_json(
        cli("tasks", "list", "--user", "alice", "--store", url, "--json", cwd=tmp_path)
    )
    assert [t["id"] for t in listed] == [open_id]
    everything = as_json(
        cli(
            "tasks",
            "list",
            "--user",
            "alice",
            "--status",
            "all",
            "--store",
            url,
            "--json",
            cwd=tmp_path,
        )
    )
    assert len(everything) == 2
    assert (
        as_json(cli("tasks", "list", "--user", "bob", "--store", url, "--json", cwd=tmp_path)) == []
    )
    shown = as_json(cli("tasks", "show", open_id, "--store", url, "--json", cwd=tmp_path))
    assert shown["stage"] == "collecting" and shown["missing_slots"][0] == "destination"
    history = as_json(cli("tasks", "history", open_id, "--store", url, "--json", cwd=tmp_path))
    assert [e["version"] for e in history["entries"]] == [1]
    resumed = as_json(cli("tasks", "resume", open_id, "--store", url, "--json", cwd=tmp_path))
    assert resumed["next_step"] == "AskSlot" and "destination" in resumed["status_text"]
    text = cli("tasks", "history", open_id, "--store", url, cwd=tmp_path)
    assert text.returncode == 0 and "started flight_booking" in text.stdout
    at_one = as_json(
        cli("tasks", "show", open_id, "--at", "1", "--store", url, "--json", cwd=tmp_path)
    )
    assert at_one["version"] == 1


def test_recover_and_ledger_from_the_environment(booked: tuple[str, str], tmp_path: Path) -> None:
    url, _ = booked
    env = {"RELAYSTATE_STORE": url}
    report = as_json(cli("recover", "--json", cwd=tmp_path, env=env))
    assert report["errors"] == {} and report["examined_actions"] == 0
    ledger = as_json(cli("demo", "ledger", "--json", cwd=tmp_path, env=env))
    assert [(e["kind"], e["requests"], e["effects"]) for e in ledger] == [("order", 1, 1)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tasks", "show", "nope"], "no task nope"),
        (["tasks", "show", "{open}", "--user", "mallory"], "no task"),
        (["tasks", "history", "nope"], "no task nope"),
        (["tasks", "resume", "nope"], "no task nope"),
        (["tasks", "show", "{open}", "--at", "yesterday"], "--at takes a version"),
        (["tasks", "show", "{open}", "--at", "99"], ""),
        (["tasks", "list", "--user", "alice", "--status", "sleeping"], "unknown status"),
        (["tasks", "list", "--user", "alice", "--store", "mysql://x"], "unknown store URL"),
        (["tasks", "list", "--user", "alice", "--store", "sqlite://"], "bad SQLite store URL"),
        (["tasks", "resolve", "{open}", "7", "--failed"], "has no action 7"),
        (["tasks", "show", "{open}", "--app", "no.such.module:x"], "cannot load templates"),
        (["tasks", "list", "--limit", "0"], "--limit takes 1 to 10000"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    booked: tuple[str, str], tmp_path: Path, args: list[str], message: str
) -> None:
    url, open_id = booked
    args = [a.replace("{open}", open_id) for a in args]
    if "--store" not in args:
        args += ["--store", url]
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr


def test_the_demo_runs_end_to_end(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "relaystate.cli", "demo", "run", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "worker exit code: -9" in proc.stdout
    assert "order ORD-00001: 1 request(s), 1 effect(s)" in proc.stdout
    assert "The flight booking is done" in proc.stdout
    # scene 7: the new build lifts Bob's booking, its worker orders once, v1 keeps away
    assert "journal v2 by migration: migrated flight_booking from version 1 to 2" in proc.stdout
    assert "order ORD-00002: 1 request(s), 1 effect(s)" in proc.stdout
    assert "v1 leaves it alone" in proc.stdout


def test_tasks_unpin_releases_a_pinned_task(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pins.db"
    pinned = templates(tmp_path / "ledger.db")
    for t in pinned:
        t.upgrade = "pinned"
    with Runtime(open_store(url), pinned, build="old") as rt:
        tid = rt.start(Scope.user("alice"), "flight_booking", slots={"origin": "Beijing"}).task.id
    missing = cli("tasks", "unpin", tid, "--store", url, cwd=tmp_path)
    assert missing.returncode == 2 and "--reason" in missing.stderr
    unknown = cli("tasks", "unpin", "nope", "--reason", "x", "--store", url, cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error:"), unknown.stderr
    done = as_json(
        cli(
            "tasks",
            "unpin",
            tid,
            "--reason",
            "old build retired",
            "--store",
            url,
            "--json",
            cwd=tmp_path,
        )
    )
    assert done["id"] == tid and done["pinned"] is False
    history = cli("tasks", "history", tid, "--store", url, cwd=tmp_path)
    assert "unpinned from build 'old'" in history.stdout, history.stdout
