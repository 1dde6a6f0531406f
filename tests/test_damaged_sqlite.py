"""A SQLite store zeroed in the middle is found, named and refused, on every command.

From outside: a store with a few sessions and tasks, one 4 KB page overwritten with zeros,
and each command in a new process: exit code 2, one ``error:`` line naming the file, saying
it is damaged and what to do, no traceback, and the file as it was. A store opened whole
(small enough to be read at open) is refused at once; in a bigger one (here: the limit set
to 0, in the process) the damage is the typed StoreCorrupt of the first call that reads the
page, and nothing that writes after a commit (memory) or loops over tasks (recovery) logs
it and carries on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.demo import templates
from relaystate.errors import StoreCorrupt
from relaystate.memory.recorder import MemoryLayers, Recorder
from relaystate.model import Message, Session
from relaystate.store import Stores
from relaystate.store.sqlite import files
from relaystate.store.turn_memory import Remember

from . import recovery_app
from .support import cli
from .test_cli_edges import assert_clean_error

PAGE = 4096
ADMIN = Scope.admin("test")


@dataclass(frozen=True)
class Good:
    """A closed store (every page in the file) that three users talked to."""

    data: bytes
    task_id: str
    roots: dict[str, int]
    """The first page of each table and index."""


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Good:
    folder = tmp_path_factory.mktemp("good")
    store = f"sqlite:///{folder}/good.db"
    for user in ("alice", "bob", "carol"):
        for words in ("book a flight from Beijing to Shanghai", "refund my order 12"):
            said = cli("say", "--user", user, words, "--store", store, cwd=folder)
            assert said.returncode == 0, said.stderr
    with Runtime(open_store(store), templates(folder / "l.db")) as rt:
        task_id = rt.tasks(ADMIN)[0].id
    assert not (folder / "good.db-wal").exists()
    data = (folder / "good.db").read_bytes()
    with contextlib.closing(sqlite3.connect(folder / "good.db")) as db:
        roots = dict(db.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0"))
    return Good(data, task_id, roots)


def _zeroed(data: bytes, page: int) -> bytes:
    changed = bytearray(data)
    changed[(page - 1) * PAGE : page * PAGE] = bytes(PAGE)
    return bytes(changed)


DAMAGE: dict[str, Callable[[Good], int]] = {
    # name: the page zeroed
    "4096 bytes at offset 8192": lambda good: 8192 // PAGE + 1,
    "the tasks table": lambda good: good.roots["tasks"],
    "the journal": lambda good: good.roots["journal"],
    "the messages": lambda good: good.roots["messages"],
    "the memory items": lambda good: good.roots["memories"],
    "the work queue": lambda good: good.roots["work"],
    "the last page": lambda good: len(good.data) // PAGE,
}
COMMANDS = {
    "say": ["say", "--user", "alice", "hello again"],
    "tasks list": ["tasks", "list"],
    "tasks show": ["tasks", "show", "{task}"],
    "tasks history": ["tasks", "history", "{task}"],
    "recover": ["recover"],
    "db status": ["db", "status"],
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_every_command_refuses_a_damaged_store(damage: str, good: Good, tmp_path: Path) -> None:
    broken = _zeroed(good.data, DAMAGE[damage](good))
    path = tmp_path / "s.db"
    path.write_bytes(broken)
    for name, args in COMMANDS.items():
        argv = [a.replace("{task}", good.task_id) for a in args]
        proc = cli(*argv, "--store", f"sqlite:///{path}", cwd=tmp_path)
        line = assert_clean_error(proc, "damaged", str(path), "backup", ".recover")
        assert line, name
    assert path.read_bytes() == broken  # nothing written to it
    assert sorted(os.listdir(tmp_path)) == ["s.db"]  # no -wal, no ledger, nothing new


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open as a store too big to read whole at open: damage shows at use."""
    monkeypatch.setattr(files, "CHECK_PAGES_UP_TO", 0)


def _copy(good: Good, tmp_path: Path, table: str) -> str:
    (tmp_path / "s.db").write_bytes(_zeroed(good.data, good.roots[table]))
    return f"sqlite:///{tmp_path}/s.db"


def test_a_small_store_is_refused_when_opened(good: Good, tmp_path: Path) -> None:
    url = _copy(good, tmp_path, "work")  # a table no read of this test touches
    with pytest.raises(StoreCorrupt, match=r"s\.db is damaged \(SQLite: database disk image"):
        open_store(url)


@pytest.mark.usefixtures("unchecked")
def test_a_damaged_page_read_is_the_typed_error(good: Good, tmp_path: Path) -> None:
    url = _copy(good, tmp_path, "tasks")
    with Runtime(open_store(url), templates(tmp_path / "l.db")) as rt:
        with pytest.raises(StoreCorrupt) as found:
            rt.task(ADMIN, good.task_id)
        assert found.value.path.endswith("s.db") and "malformed" in str(found.value)
        with pytest.raises(StoreCorrupt):
            rt.tasks(ADMIN)


def _session(user: str) -> tuple[Session, list[Message]]:
    said = [Message("s-new", user, "user", "my passport expires in June")]
    return Session("s-new", user), said


@pytest.mark.usefixtures("unchecked")
def test_memory_written_after_a_commit_raises_damage_not_a_warning(
    good: Good, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = open_store(_copy(good, tmp_path, "memories")).tasks
    after = Stores.of(backend)  # type: ignore[arg-type]
    after.memory_in_commit = False  # as a backend that writes memory after the commit
    try:
        session, said = _session("alice")
        with caplog.at_level(logging.WARNING), pytest.raises(StoreCorrupt, match="damaged"):
            after.write_session(session, said, remember=Remember())
        assert not [r for r in caplog.records if "not recorded" in r.getMessage()]
    finally:
        after.close()


@pytest.mark.usefixtures("unchecked")
def test_the_recorder_raises_damage(
    good: Good, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Runtime(open_store(_copy(good, tmp_path, "memories")), []) as rt:
        recorder = Recorder(MemoryLayers.of(rt), clock=rt.clock)
        _, said = _session("alice")
        said[0].id = 1
        turn = SimpleNamespace(session_id="s-new", messages=said, state=None)
        with caplog.at_level(logging.WARNING), pytest.raises(StoreCorrupt):
            recorder.record(Scope.user("alice"), turn)  # type: ignore[arg-type]
        assert not [r for r in caplog.records if "not recorded" in r.getMessage()]


@pytest.mark.usefixtures("unchecked")
def test_recovery_stops_on_damage_instead_of_reporting_it_per_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYSTATE_LEDGER", str(tmp_path / "ledger.db"))
    monkeypatch.setenv("RECOVERY_CRASH", "1")
    url = f"sqlite:///{tmp_path}/s.db"
    crashed = Runtime(open_store(url), recovery_app.templates())
    task_id = crashed.start(Scope.user("u"), "payment", run=False).task.id
    with pytest.raises(recovery_app.Crash):
        crashed.advance(ADMIN, task_id)  # a running action, its effect made, not recorded
    crashed.close()  # deregisters: its lease counts as expired at once
    monkeypatch.delenv("RECOVERY_CRASH")
    assert not (tmp_path / "s.db-wal").exists()
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db:
        (journal,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'journal'"
        ).fetchone()
    data = (tmp_path / "s.db").read_bytes()
    (tmp_path / "s.db").write_bytes(_zeroed(data, journal))
    rt = Runtime(open_store(url), recovery_app.templates(), lease=timedelta(seconds=1))
    with rt, pytest.raises(StoreCorrupt, match="damaged"):
        rt.recover(ADMIN)
