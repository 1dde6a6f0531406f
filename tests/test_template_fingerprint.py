"""A Task records which definition of its template made it: a process whose definition of
the same name and version differs refuses to write it (``TemplateMismatch``: CLI exit 2,
HTTP 409) and leaves it exactly as stored; reading it still works, and a new version with a
migration is no mismatch."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient

from relaystate import Runtime, Scope, Slot, Stage, TaskTemplate, all_required_slots, open_store
from relaystate.errors import Conflict, TemplateMismatch
from relaystate.model import TaskState
from relaystate.server import create_app
from relaystate.server.api_keys import issue
from relaystate.task.fingerprint import SCHEME, declaration
from relaystate.task.templates import condition, user_confirmed

from .support import cli

ALICE = Scope.user("alice")
ADMIN = Scope.admin("test")

APP = """\
from relaystate import Slot, Stage, TaskTemplate, all_required_slots


def templates():
    ticket = TaskTemplate(
        "ticket",
        slots=[Slot("subject"), Slot("priority", choices=["low", "high"]){extra}],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("filing", actions=["file"]),
            Stage("done"),
        ],
    )

    @ticket.action(side_effect=True, idempotent=True)
    def file(ctx):
        return {{"ticket": "T-1"}}

    return [ticket]
"""
"""A user's own app: definition A, or B (``extra``: one more required slot), both
``ticket`` version 1."""


def write_apps(folder: Path) -> None:
    (folder / "ticket_a.py").write_text(APP.format(extra=""))
    (folder / "ticket_b.py").write_text(APP.format(extra=', Slot("team")'))


def load(folder: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"fp_{name}_{id(folder)}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def app(folder: Path, name: str) -> list[TaskTemplate]:
    made: list[TaskTemplate] = load(folder, name).templates()
    return made


def rows(state: TaskState) -> dict[str, Any]:
    return state.to_dict()


# -- the fingerprint itself ------------------------------------------------------------------
def template(
    *,
    slots: list[Slot] | None = None,
    stages: list[Stage] | None = None,
    version: int = 1,
    idempotent: bool = True,
    actions: tuple[str, ...] = ("file", "notify"),
    **options: Any,
) -> TaskTemplate:
    made = TaskTemplate(
        "ticket",
        version=version,
        slots=slots
        if slots is not None
        else [Slot("subject"), Slot("priority", choices=["low", "high"])],
        stages=stages
        if stages is not None
        else [
            Stage("collecting", exit=all_required_slots),
            Stage("filing", actions=["file", "notify"]),
            Stage("done"),
        ],
        **options,
    )
    for name in actions:
        made.action(name=name, side_effect=name == "file", idempotent=idempotent)(lambda ctx: None)
    return made


def test_the_fingerprint_is_the_same_in_separate_processes(tmp_path: Path) -> None:
    write_apps(tmp_path)
    code = "import ticket_a; print(ticket_a.templates()[0].fingerprint)"
    seen = []
    for seed in ("1", "2"):  # a salted hash() would differ between these
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(tmp_path)}
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        seen.append(done.stdout.strip())
    here = app(tmp_path, "ticket_a")[0].fingerprint
    assert seen == [here, here]
    assert here.startswith(SCHEME) and len(here) == len(SCHEME) + 64
    assert app(tmp_path, "ticket_b")[0].fingerprint != here


def test_the_scheme_hashes_what_it_says() -> None:
    """The value for a fixed declaration: if this changes, every stored Task of this scheme
    would be refused, so a change of what is hashed takes a new ``SCHEME``."""
    assert template().fingerprint == (
        "v1:34c2c615044ebc02f4dc49db6450afbcc08cb66904c024e115ea2bb88ea61254"
    )


@pytest.mark.parametrize(
    "changed",
    [
        {"slots": [Slot("subject"), Slot("priority", choices=["low", "high"]), Slot("team")]},
        {"slots": [Slot("subject"), Slot("priority", choices=["low", "urgent"])]},
        {"slots": [Slot("subject", required=False), Slot("priority", choices=["low", "high"])]},
        {"slots": [Slot("subject", kind="email"), Slot("priority", choices=["low", "high"])]},
        {"slots": [Slot("subject", pattern=r"\w+"), Slot("priority", choices=["low", "high"])]},
        {
            "stages": [
                Stage("collecting", exit=all_required_slots),
                Stage("checking", exit=user_confirmed),
                Stage("filing", actions=["file", "notify"]),
                Stage("done"),
            ]
        },
        {
            "stages": [
                Stage("collecting", exit=all_required_slots),
                Stage("filing", actions=["notify", "file"]),  # the order they run in
                Stage("done"),
            ]
        },
        {
            "stages": [
                Stage("collecting", exit=user_confirmed),
                Stage("filing", actions=["file", "notify"]),
                Stage("done"),
            ]
        },
        {"idempotent": False},
        {"version": 2},
    ],
    ids=[
        "slot added",
        "choice changed",
        "required changed",
        "kind changed",
        "pattern added",
        "stage added",
        "actions reordered",
        "exit changed",
        "idempotency changed",
        "version",
    ],
)
def test_the_fingerprint_follows_each_declared_part(changed: dict[str, Any]) -> None:
    assert template(**changed).fingerprint != template().fingerprint


def test_a_check_or_compensation_declared_later_counts() -> None:
    made = template()
    before = made.fingerprint
    made.actions["file"].check(lambda ctx: None)  # type: ignore[arg-type,return-value]
    assert made.fingerprint != before


def test_order_and_words_that_decide_nothing_do_not_count() -> None:
    base = template().fingerprint
    reordered = template(
        slots=[Slot("priority", choices=["high", "low"]), Slot("subject")],
        actions=("notify", "file"),
    )
    assert reordered.fingerprint == base
    worded = template(
        slots=[
            Slot("subject", ask={"en": "What is it about?"}, labels={"zh": "主题"}),
            Slot("priority", choices=["low", "high"], synonyms={"urgent": "high"}),
        ],
        titles={"en": "support ticket"},
        triggers={"en": ["open a ticket"]},
        goal="file a ticket",
    )
    assert worded.fingerprint == base


def test_callables_count_by_name_never_by_address() -> None:
    def first(task: Any) -> bool:
        return True

    def second(task: Any) -> bool:
        return True

    second.__name__ = first.__name__
    one = template(slots=[Slot("subject", parser=str.strip)]).fingerprint
    assert one == template(slots=[Slot("subject", parser=str.strip)]).fingerprint
    assert one != template(slots=[Slot("subject", parser=str.upper)]).fingerprint
    gate = [Stage("collecting", exit=condition(first)), Stage("done")]
    same = [Stage("collecting", exit=condition(second)), Stage("done")]
    assert template(stages=gate, actions=()).fingerprint == (
        template(stages=same, actions=()).fingerprint
    )
    assert "0x" not in repr(declaration(template(slots=[Slot("s", parser=lambda v: v)])))


# -- refusing another definition's Task --------------------------------------------------------
def test_another_process_with_another_definition_writes_nothing(
    sql_store_url: str, tmp_path: Path
) -> None:
    write_apps(tmp_path)
    with Runtime(open_store(sql_store_url), app(tmp_path, "ticket_a")) as rt:
        started = rt.start(ALICE, "ticket", slots={"subject": "printer jam"})
        assert started.task.missing_slots == ["priority"]
        assert started.task.template_fingerprint == app(tmp_path, "ticket_a")[0].fingerprint
        stored = rows(rt.task(ADMIN, started.task.id))
    task_id = started.task.id
    store = ["--store", sql_store_url]
    for words in (["resume", task_id], ["fill", task_id, "priority=high"]):
        done = cli("tasks", *words, *store, "--app", "ticket_b:templates", cwd=tmp_path)
        assert done.returncode == 2, (done.stdout, done.stderr)
        said = done.stderr
        assert said.startswith("error: ") and "Traceback" not in said
        assert "'ticket' version 1" in said and "version=2" in said
        assert app(tmp_path, "ticket_a")[0].fingerprint in said
        assert app(tmp_path, "ticket_b")[0].fingerprint in said
    with Runtime(open_store(sql_store_url), app(tmp_path, "ticket_a")) as rt:
        assert rows(rt.task(ADMIN, task_id)) == stored  # same version, slots, everything
        _, entries = rt.history(ADMIN, task_id)
        assert len(entries) == 1
    shown = cli("tasks", "show", task_id, *store, "--app", "ticket_b:templates", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr  # reading is always safe
    told = cli("tasks", "history", task_id, *store, "--app", "ticket_b:templates", cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    listed = cli("tasks", "list", *store, cwd=tmp_path)
    assert listed.returncode == 0 and task_id[:8] in listed.stdout
    same = cli("tasks", "fill", task_id, "priority=high", *store, "--app", "ticket_a", cwd=tmp_path)
    assert same.returncode == 0, same.stderr  # the definition that made it goes on
    with Runtime(open_store(sql_store_url), app(tmp_path, "ticket_a")) as rt:
        assert rt.task(ADMIN, task_id).task.status == "done"


def test_in_process_every_write_is_refused_and_reading_works(tmp_path: Path) -> None:
    write_apps(tmp_path)
    url = f"sqlite:///{tmp_path}/store.db"
    with Runtime(open_store(url), app(tmp_path, "ticket_a")) as rt:
        task_id = rt.start(ALICE, "ticket", slots={"subject": "jam"}).task.id
        stored = rows(rt.task(ALICE, task_id))
    with Runtime(open_store(url), app(tmp_path, "ticket_b")) as rt:
        for write in (
            lambda: rt.resume(ALICE, task_id),
            lambda: rt.fill(ALICE, task_id, {"priority": "low"}),
            lambda: rt.confirm(ALICE, task_id),
            lambda: rt.cancel(ALICE, task_id),
            lambda: rt.advance(ADMIN, task_id),
        ):
            with pytest.raises(TemplateMismatch) as caught:
                write()
            assert isinstance(caught.value, Conflict)
            assert caught.value.task_id == task_id and caught.value.version == 1
        assert rows(rt.task(ALICE, task_id)) == stored
        assert rt.resume(ALICE, task_id, run=False).task.version == stored["task"]["version"]
        assert rt.tasks(ALICE)[0].id == task_id


def test_a_turn_in_another_process_writes_neither_task_nor_words(tmp_path: Path) -> None:
    write_apps(tmp_path)
    url = f"sqlite:///{tmp_path}/store.db"
    with Runtime(open_store(url), app(tmp_path, "ticket_a")) as rt:
        task_id = rt.start(ALICE, "ticket", slots={"subject": "jam"}, session_id="s1").task.id
        stored = rows(rt.task(ALICE, task_id))
    say = ["say", "--user", "alice", "--session", "s1", "--store", url, "high"]
    refused = cli(*say, "--app", "ticket_b:templates", cwd=tmp_path)
    assert refused.returncode == 2 and "fingerprint" in refused.stderr, refused.stderr
    with Runtime(open_store(url), app(tmp_path, "ticket_a")) as rt:
        assert rows(rt.task(ALICE, task_id)) == stored
        assert rt.messages(ALICE, "s1") == []  # the words ride in the refused commit
    answered = cli(*say, "--app", "ticket_a:templates", cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    with Runtime(open_store(url), app(tmp_path, "ticket_a")) as rt:
        assert rt.task(ALICE, task_id).task.slots["priority"] == "high"


def test_the_http_api_answers_409(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    write_apps(tmp_path)
    url = f"sqlite:///{tmp_path}/api.db"
    with Runtime(open_store(url), app(tmp_path, "ticket_a")) as rt:
        task_id = rt.start(ALICE, "ticket", slots={"subject": "jam"}).task.id
        stored = rows(rt.task(ALICE, task_id))
    with Runtime(open_store(url), app(tmp_path, "ticket_b")) as rt:
        key = issue(rt, ADMIN, "alice", name="alice", admin=False, now=rt.clock())[1]
        client = TestClient(create_app(rt, recover_on_start=False), raise_server_exceptions=False)
        headers = {"Authorization": f"Bearer {key}"}
        body = {"slots": {"priority": "low"}}
        answer = client.post(f"/v1/tasks/{task_id}/slots", json=body, headers=headers)
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert error["code"] == "template_mismatch" and "version=2" in error["message"]
        answer = client.post(f"/v1/tasks/{task_id}/resume", headers=headers)
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "template_mismatch"
        shown = client.get(f"/v1/tasks/{task_id}", headers=headers)
        assert shown.status_code == 200 and shown.json()["task"]["version"] == 1
        assert rows(rt.task(ALICE, task_id)) == stored


# -- older Tasks, new versions -----------------------------------------------------------------
def test_a_task_stored_before_fingerprints_is_stamped_on_its_next_write(tmp_path: Path) -> None:
    write_apps(tmp_path)
    path = tmp_path / "store.db"
    with Runtime(open_store(f"sqlite:///{path}"), app(tmp_path, "ticket_a")) as rt:
        task_id = rt.start(ALICE, "ticket", slots={"subject": "jam"}).task.id
    with sqlite3.connect(path) as db:  # as a build from before fingerprints wrote it
        db.execute("UPDATE tasks SET data = json_remove(data, '$.template_fingerprint')")
    with Runtime(open_store(f"sqlite:///{path}"), app(tmp_path, "ticket_b")) as rt:
        assert rt.task(ALICE, task_id).task.template_fingerprint == ""
        assert not rt.resume(ALICE, task_id, run=False).task.template_fingerprint
        filled = rt.fill(ALICE, task_id, {"priority": "low"})
        assert filled.task.template_fingerprint == app(tmp_path, "ticket_b")[0].fingerprint
        assert filled.task.missing_slots == ["team"]
    with (
        Runtime(open_store(f"sqlite:///{path}"), app(tmp_path, "ticket_a")) as rt,
        pytest.raises(TemplateMismatch),
    ):
        rt.fill(ALICE, task_id, {"priority": "high"})


def versioned(version: int, *, extra: bool = False) -> TaskTemplate:
    names = [Slot("passenger_name")] if version == 1 else [Slot("first"), Slot("last")]
    return TaskTemplate(
        "booking",
        version=version,
        slots=[*names, Slot("seat"), *([Slot("meal")] if extra else [])],
        stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
    )


def with_migration() -> TaskTemplate:
    v2 = versioned(2)

    @v2.migration(from_version=1)
    def split(task: dict[str, Any]) -> dict[str, Any]:
        first, _, last = task["slots"].pop("passenger_name", "").partition(" ")
        task["slots"].update(first=first, last=last)
        return task

    return v2


@pytest.fixture
def booked(tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path}/bookings.db"
    with Runtime(open_store(url), [versioned(1)], build="b1") as rt:
        started = rt.start(ALICE, "booking", slots={"passenger_name": "Ada Lovelace"}, run=False)
    yield url, started.task.id


@pytest.mark.parametrize("carried", [[], [versioned(1)]], ids=["v2 only", "v1 and v2"])
def test_a_new_version_with_a_migration_is_no_mismatch(
    booked: tuple[str, str], carried: list[TaskTemplate]
) -> None:
    url, task_id = booked
    v2 = with_migration()
    with Runtime(open_store(url), [*carried, v2], build="b2") as rt:
        report = rt.migrate(ADMIN)
        assert sum(report.lifted.values()) == 1 and not report.failed
        lifted = rt.task(ALICE, task_id).task
        assert (lifted.template_version, lifted.slots) == (2, {"first": "Ada", "last": "Lovelace"})
        assert lifted.template_fingerprint == v2.fingerprint
        assert rt.fill(ALICE, task_id, {"seat": "12A"}).task.status == "done"


def test_a_lift_from_another_definition_of_the_old_version_is_refused(
    booked: tuple[str, str],
) -> None:
    url, task_id = booked
    with Runtime(open_store(url), [versioned(1, extra=True), with_migration()]) as rt:
        before = rows(rt.task(ADMIN, task_id))
        assert before["task"]["template_version"] == 1  # shown as stored, not lifted
        dry = rt.migrate(ADMIN, dry_run=True)
        assert sum(dry.failed.values()) == 1
        report = rt.migrate(ADMIN)
        assert not report.lifted and "fingerprint" in next(iter(report.reasons.values()))
        with pytest.raises(TemplateMismatch):
            rt.fill(ALICE, task_id, {"passenger_name": "Ada Byron"})
        assert rows(rt.task(ADMIN, task_id)) == before


def test_a_pinned_task_runs_on_in_its_build_with_the_same_definition(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/pinned.db"

    def pinned(extra: bool = False) -> TaskTemplate:
        slots = [Slot("order"), *([Slot("reason")] if extra else [])]
        return TaskTemplate(
            "refund",
            slots=slots,
            stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
            upgrade="pinned",
        )

    with Runtime(open_store(url), [pinned()], build="b1") as rt:
        task_id = rt.start(ALICE, "refund", run=False).task.id
    with Runtime(open_store(url), [pinned()], build="b1") as rt:
        assert rt.fill(ALICE, task_id, {"order": "A1"}).task.status == "done"
    with Runtime(open_store(url), [pinned()], build="b1") as rt:
        task_id = rt.start(ALICE, "refund", run=False).task.id
    with (
        Runtime(open_store(url), [pinned(extra=True)], build="b1") as rt,
        pytest.raises(TemplateMismatch),
    ):
        rt.fill(ALICE, task_id, {"order": "A2"})
