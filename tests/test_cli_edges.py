"""Edges of the command line found from outside, run as real processes: a digit ``int``
cannot read, a URL ``urlsplit`` cannot parse (on every command taking ``--store`` or
``--cache``), and ``tasks resolve`` on an Action that needs no one. Each is one line
``error: ...`` and exit code 2, never a traceback, and changes nothing."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.cli import parser
from relaystate.demo import templates
from relaystate.errors import StoreURLError
from relaystate.store import split_url

from . import resolve_app
from .support import cli

ROOT = Path(__file__).resolve().parent.parent
ADMIN = Scope.admin("test")


def assert_clean_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, one ``error:`` line on stderr saying each of ``fragments``, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, str]:
    """A SQLite store with one open flight booking (version 1); its URL and the task id."""
    url = f"sqlite:///{tmp_path}/edges.db"
    with Runtime(open_store(url), templates(tmp_path / "edges-ledger.db")) as rt:
        task_id = rt.start(Scope.user("alice"), "flight_booking", slots={"origin": "Paris"})
    return url, task_id.task.id


# -- digits int() refuses -------------------------------------------------------------------
@pytest.mark.parametrize("at", ["²", "١", "1²", "⑦"])
def test_at_takes_ascii_digits_or_an_iso_time(
    at: str, store: tuple[str, str], tmp_path: Path
) -> None:
    url, task_id = store
    proc = cli("tasks", "show", task_id, "--at", at, "--store", url, cwd=tmp_path)
    assert_clean_error(proc, "--at takes a version number or an ISO time")
    shown = cli("tasks", "show", task_id, "--at", "1", "--store", url, "--json", cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["version"] == 1, shown.stderr


@pytest.mark.parametrize(
    "args",
    [["tasks", "list", "--limit", "²"], ["worker", "--batch", "²"]],
    ids=["tasks list --limit", "worker --batch"],
)
def test_a_count_in_other_digits_is_a_usage_error(
    args: list[str], store: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = store
    assert_clean_error(cli(*args, "--store", url, cwd=tmp_path), "²")


# -- URLs urlsplit refuses ------------------------------------------------------------------
def _commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Every command of the parser (``tasks show``...) and its options."""
    found: dict[str, set[str]] = {}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_commands(sub, (*prefix, name)))
            return found
    found[" ".join(prefix)] = {o for a in p._actions for o in a.option_strings}
    return found


ARGS = {
    # the arguments each command needs besides --store/--cache ({task}: an existing task)
    "say": ["--user", "alice", "hello"],
    "chat": ["--user", "alice"],
    "tasks list": [],
    "tasks show": ["{task}"],
    "tasks history": ["{task}"],
    "tasks resume": ["{task}"],
    "tasks fill": ["{task}", "destination=Rome"],
    "tasks resolve": ["{task}", "1", "--failed"],
    "tasks rerun": ["{task}", "1"],
    "tasks unpin": ["{task}", "--reason", "moving on"],
    "recover": [],
    "compact": [],
    "demo run": [],
    "demo ledger": [],
    "db status": [],
    "db upgrade": [],
    "serve": [],
    "users create": ["bob"],
    "users revoke": ["bob"],
    "users list": [],
    "memory import": ["{items}", "--user", "alice", "--namespace", "notes"],
    "memory search": ["paris", "--user", "alice", "--namespace", "notes"],
    "memory reindex": [],
    "worker": [],
    "workers": [],
    "builds": [],
    "migrate": ["--dry-run"],
    "info": [],
}
BAD_URLS = {
    "--store": [("postgresql://u:secret@[::1", "bad store URL"), ("redis://[::1", "bad store URL")],
    "--cache": [
        ("redis://:secret@[::1", "bad cache URL"),
        ("redis://localhost:99999/0", "bad cache URL"),
        ("redis://localhost:²/0", "bad cache URL"),
    ],
}

REFUSED = {
    ("demo run", "--cache"): "it takes no --cache",
    ("demo ledger", "--store"): "no ledger at relaystate-ledger.db",  # it reads no store
    ("demo ledger", "--cache"): "no ledger at",
}
"""Commands that refuse the option whatever its URL, or use no store."""


def test_the_table_names_every_command_taking_a_store() -> None:
    taking = {name for name, opts in _commands(parser()).items() if "--store" in opts}
    assert taking == set(ARGS)  # a new command joins the sweep below
    assert all("--cache" in _commands(parser())[name] for name in taking)


@pytest.mark.parametrize("command", list(ARGS))
def test_a_url_that_cannot_be_parsed_is_one_clear_error(
    command: str, store: tuple[str, str], tmp_path: Path
) -> None:
    url, task_id = store
    before = sorted(os.listdir(tmp_path))
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "n1", "text": "I live in Paris"}\n')
    args = [a.replace("{task}", task_id).replace("{items}", str(items)) for a in ARGS[command]]
    for option, cases in BAD_URLS.items():
        for bad, says in cases:
            given = [option, bad] if option == "--store" else ["--store", url, option, bad]
            proc = cli(*command.split(), *args, *given, cwd=tmp_path, stdin="")
            if (command, option) in REFUSED:
                line = assert_clean_error(proc, REFUSED[command, option])
            else:
                line = assert_clean_error(proc, says, bad.replace(":secret@", ":***@"))
            assert "secret" not in line  # a password is never shown
    assert sorted(os.listdir(tmp_path)) == sorted([*before, "items.jsonl"])  # nothing made


def test_split_url_names_the_url_and_what_is_wrong() -> None:
    with pytest.raises(StoreURLError, match=r"bad cache URL 'redis://h:99999': Port out of range"):
        split_url("redis://h:99999", what="cache", port=True)
    # several hosts, as libpq takes them, are no port error: libpq checks them itself
    assert split_url("postgresql://h1:5432,h2:5433/db").hostname == "h1"
    with pytest.raises(StoreURLError, match="Invalid IPv6 URL"):
        open_store("memory://[::1")


# -- resolve settles only what needs a person ------------------------------------------------
def _failed_tasks(url: str) -> tuple[str, str]:
    """A shipment whose one Action failed for good (the Task failed), and an exchange whose
    compensation failed (the Task needs attention on it)."""
    with Runtime(open_store(url), resolve_app.templates()) as rt:
        shipment = rt.start(Scope.user("alice"), "shipment").task.id
        exchange = rt.start(Scope.user("alice"), "exchange").task.id
        assert rt.task(ADMIN, shipment).task.status == "failed"
        assert rt.task(ADMIN, exchange).task.status == "needs_attention"
    return shipment, exchange


def _resolve(url: str, task_id: str, seq: int, outcome: str) -> subprocess.CompletedProcess[str]:
    """``relaystate tasks resolve`` with the templates of :mod:`tests.resolve_app`."""
    command = ["tasks", "resolve", task_id, str(seq), f"--{outcome}", "--json", "--store", url]
    return subprocess.run(
        [sys.executable, "-m", "relaystate.cli", *command, "--app", "tests.resolve_app:templates"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_resolve_refuses_an_action_that_failed_for_good(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/resolve.db"
    shipment, exchange = _failed_tasks(url)
    with Runtime(open_store(url), resolve_app.templates()) as rt:
        before = {t: rt.task(ADMIN, t).task.version for t in (shipment, exchange)}

    for task_id, seq in ((shipment, 1), (exchange, 2), (exchange, 1)):
        for outcome in ("succeeded", "failed"):
            assert_clean_error(_resolve(url, task_id, seq, outcome), "nothing to resolve")
    with Runtime(open_store(url), resolve_app.templates()) as rt:
        assert rt.task(ADMIN, shipment).task.status == "failed"  # not turned into done
        assert {t: rt.task(ADMIN, t).task.version for t in before} == before  # nothing written

    # the failed compensation is the Action a person settles; then the saga has unwound
    settled = _resolve(url, exchange, 3, "succeeded")
    assert settled.returncode == 0, settled.stderr
    shown = json.loads(settled.stdout)
    assert shown["status"] == "failed"
    assert [a["status"] for a in shown["actions"]] == ["compensated", "failed", "success"]
    assert_clean_error(_resolve(url, exchange, 3, "failed"), "nothing to resolve")
