"""The command line keeps its word: what the README and the docs say of it is so. Each test
runs ``relaystate`` as a new process, as a user types it."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.cli import parser
from relaystate.demo import templates

from .support import cli

ALICE, BOB = Scope.user("alice"), Scope.user("bob")


def seeded(tmp_path: Path, ids: dict[str, Scope]) -> str:
    """A store with a flight booking per id, for its user; the store's URL."""
    url = f"sqlite:///{tmp_path}/store.db"
    with Runtime(open_store(url), templates(tmp_path / "ledger.db")) as rt:
        for task_id, user in ids.items():
            rt.start(user, "flight_booking", slots={"origin": "Beijing"}, task_id=task_id)
    return url


def test_version_and_info(tmp_path: Path) -> None:
    version = cli("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("relaystate ")
    missing = cli("info", "--json", cwd=tmp_path)
    assert missing.returncode == 0, missing.stderr
    said = json.loads(missing.stdout)
    assert said["exists"] is False and said["store"] == "sqlite:///relaystate.db"
    assert said["store_file"] == str(tmp_path / "relaystate.db")
    assert "default" in said["store_from"]
    assert not (tmp_path / "relaystate.db").exists()  # looking creates nothing
    url = seeded(tmp_path, {"a" * 32: ALICE, "b" * 32: BOB})
    found = json.loads(cli("info", "--json", "--store", url, cwd=tmp_path).stdout)
    assert found["exists"] and found["tasks"] == {"waiting_user": 2}
    assert found["schema"]["current"] == found["schema"]["latest"] >= 1
    assert "flight_booking v1" in found["templates"]
    shown = cli("info", "--store", url, cwd=tmp_path).stdout
    assert "tasks      2: 2 waiting_user" in shown and "schema     version" in shown


def test_a_task_is_named_by_a_unique_prefix(tmp_path: Path) -> None:
    first, second, bobs = "5ba18a57" + "0" * 24, "5ba18a99" + "0" * 24, "5ba1c" + "0" * 27
    url = seeded(tmp_path, {first: ALICE, second: ALICE, bobs: BOB})
    shown = cli("tasks", "show", first[:8], "--store", url, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == first
    for command in (["history", first[:7]], ["resume", second[:7]]):
        run = cli("tasks", *command, "--store", url, "--json", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    ambiguous = cli("tasks", "show", "5ba18a", "--store", url, cwd=tmp_path)
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.startswith("error: ") and first in ambiguous.stderr
    assert "give more of it" in ambiguous.stderr and "Traceback" not in ambiguous.stderr
    unknown = cli("tasks", "show", "ffff0000", "--store", url, cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr == "error: no task ffff0000\n"
    short = cli("tasks", "show", "5ba", "--store", url, cwd=tmp_path)
    assert short.returncode == 2 and "4 characters" in short.stderr
    # a user's prefix never reaches another user's Task
    alone = cli("tasks", "show", "5ba1c", "--user", "alice", "--store", url, cwd=tmp_path)
    assert alone.returncode == 2 and alone.stderr == "error: no task 5ba1c\n"
    theirs = cli("tasks", "show", "5ba1c", "--user", "bob", "--store", url, cwd=tmp_path)
    assert theirs.returncode == 0, theirs.stderr


def test_tasks_list_without_a_user_is_the_operators_and_fits_80_columns(tmp_path: Path) -> None:
    url = seeded(tmp_path, {"c" * 32: ALICE, "d" * 32: BOB})
    listed = cli("tasks", "list", "--store", url, cwd=tmp_path, env={"COLUMNS": "80"})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["Task", "user", "type", "status", "done", "updated", "(UTC)"]
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith("cccccccc  alice  flight_booking  waiting_user") for line in lines)
    assert any(line.startswith("dddddddd  bob") for line in lines)
    assert "waiting for" in listed.stdout  # where each stands, beneath it
    mine = cli("tasks", "list", "--user", "bob", "--store", url, "--json", cwd=tmp_path)
    assert [t["id"] for t in json.loads(mine.stdout)] == ["d" * 32]


def test_serve_checks_its_port_before_it_mints_a_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        served = cli("serve", "--port", port, "--store", url, cwd=tmp_path)
    assert served.returncode == 2
    assert served.stderr.count("\n") == 1 and served.stderr.startswith("error: port ")
    assert "in use" in served.stderr and served.stdout == ""
    keys = cli("users", "list", "--store", url, "--json", cwd=tmp_path)
    assert keys.returncode != 0 or json.loads(keys.stdout) == []  # no key, maybe no store


def test_demo_run_takes_a_store_and_answers_json(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/elsewhere.db"
    run = cli("demo", "run", "--dir", str(tmp_path / "d"), "--store", url, "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["store"] == url
    assert summary["tasks"]["crash_and_recovery"]["status"] == "done"
    assert summary["tasks"]["rolling_upgrade"] == {
        "id": summary["tasks"]["rolling_upgrade"]["id"],
        "status": "done",
        "version": 2,
    }
    assert [e["effects"] for e in summary["downstream"]] == [1, 1]  # one effect per order
    assert (tmp_path / "elsewhere.db").exists() and not (tmp_path / "d" / "relaystate.db").exists()


def test_demo_prints_commands_that_can_be_pasted(tmp_path: Path) -> None:
    run = cli("demo", "run", "--dir", "d", cwd=tmp_path, env={"COLUMNS": "80"})
    assert run.returncode == 0, run.stderr
    tries = [line.strip() for line in run.stdout.splitlines() if line.startswith("  relaystate ")]
    assert len(tries) == 2
    for line in tries:
        pasted = cli(*line.split()[1:], cwd=tmp_path)
        assert pasted.returncode == 0, (line, pasted.stderr)
        assert pasted.stdout.strip()


def test_a_relative_sqlite_path_that_means_an_absolute_one_is_refused(tmp_path: Path) -> None:
    said = cli("say", "--user", "a", "--store", "sqlite:///tmp/x.db", "hello", cwd=tmp_path)
    assert said.returncode == 2 and "sqlite:////tmp/x.db" in said.stderr
    assert not (tmp_path / "tmp").exists()
    here = cli("say", "--user", "a", "--store", "sqlite:///./tmp/x.db", "hello", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    assert (tmp_path / "tmp" / "x.db").exists()
    helped = cli("say", "--help", cwd=tmp_path).stdout
    assert "sqlite:////absolute/path.db" in helped and "three slashes" in helped


@pytest.mark.parametrize("ref", ["support:templates", "support"])
def test_app_finds_a_module_in_the_current_directory(tmp_path: Path, ref: str) -> None:
    (tmp_path / "support.py").write_text(
        "from relaystate import Slot, Stage, TaskTemplate, all_required_slots\n"
        "def templates():\n"
        "    return [TaskTemplate('ticket', slots=[Slot('subject')],\n"
        "        stages=[Stage('collecting', exit=all_required_slots), Stage('done')],\n"
        "        triggers={'en': ['open a ticket']})]\n"
    )
    said = cli("say", "--user", "u", "--app", ref, "--json", "open a ticket", cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout)["task"]["type"] == "ticket"


def _leaves(cmd: argparse.ArgumentParser, words: list[str]) -> list[tuple[str, set[str]]]:
    subs = [a for a in cmd._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(" ".join(words), {s for a in cmd._actions for s in a.option_strings})]
    return [leaf for n, sub in subs[0].choices.items() for leaf in _leaves(sub, [*words, n])]


def test_every_command_takes_the_shared_options_the_readme_names() -> None:
    """The README: every command but init takes --store, --cache and --json; the ones
    that run templates also --ledger and --app."""
    leaves = dict(_leaves(parser(), []))
    lacking = [
        name
        for name, options in leaves.items()
        if name != "init" and not {"--store", "--cache", "--json"} <= options
    ]
    assert lacking == []
    runs_templates = ["say", "chat", "serve", "worker", "migrate", "recover", "tasks show"]
    assert [n for n in runs_templates if not {"--ledger", "--app"} <= leaves[n]] == []
