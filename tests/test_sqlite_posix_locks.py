"""A Ledger or a store opened in a process that already has a connection on the same file
must not drop that connection's POSIX locks: closing any descriptor of the file does, and
another process's closing connection then deletes the WAL under it, so a COMMIT that
returned is lost (a done Task whose effect is not in the ledger)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from relaystate.demo.ledger import Ledger


def _python(code: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], text=True, **kwargs)  # type: ignore[call-overload]


def _holding(path: Path, table: str) -> subprocess.Popen[str]:
    """A third process that keeps a connection open on ``path`` until told on stdin (so
    the file's last closer, who would checkpoint it, is not the process under test)."""
    holder = _python(
        "import sqlite3, sys\n"
        f"db = sqlite3.connect({str(path)!r})\n"
        f"db.execute('SELECT count(*) FROM {table}').fetchone()\n"
        "print('open', flush=True); sys.stdin.readline(); db.close()",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
    return holder


def test_a_commit_survives_a_ledger_opened_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger(path).apply("seed", "k", {}, deduplicate=False)
    ledger = Ledger(path)
    db = ledger._connect()
    try:
        ledger._ensure(db)  # this thread's connection is open (and holds its SHARED lock)
        Ledger(path)  # another thread of this process starts an action: checks the file
        closing = _python(
            f"from relaystate.demo.ledger import Ledger; Ledger({str(path)!r}).status('seed')"
        )
        assert closing.wait(60) == 0  # another process's connection closes: not the last one
        holder = _holding(path, "effects")
        ledger._apply(db, "task:1:act:x", "k", {}, deduplicate=False)
    finally:
        db.close()
    holder.communicate("\n", timeout=60)
    assert Ledger(path).status("task:1:act:x") is not None, "an effect apply() returned is lost"


def test_a_store_commit_survives_the_same_store_opened_again(tmp_path: Path) -> None:
    """The same hazard for the store: a second ``open_store`` of the file in this process
    (a CLI command, a test, a second runtime) checks the file while the first holds it."""
    from relaystate import Runtime, Scope, open_store
    from relaystate.demo import templates

    url = f"sqlite:///{tmp_path}/store.db"
    alice = Scope.user("alice")
    first = Runtime(open_store(url), templates(tmp_path / "ledger.db"))
    try:
        first.start(alice, "flight_booking", slots={"origin": "Beijing"})  # connection in use
        open_store(url).close()  # opened again in this process: its file is checked
        closing = _python(f"from relaystate import open_store; open_store({url!r}).close()")
        assert closing.wait(60) == 0
        holder = _holding(tmp_path / "store.db", "tasks")
        kept = first.start(alice, "flight_booking", slots={"origin": "Shanghai"}).task.id
    finally:
        first.close()
    holder.communicate("\n", timeout=60)
    with Runtime(open_store(url), templates(tmp_path / "ledger.db")) as again:
        assert again.task(alice, kept).task.slots["origin"] == "Shanghai"
