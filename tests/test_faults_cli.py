"""Broken environments get a clear error: the storage-fault harness of the command line.

Every bad store file, ledger, setting and option below runs the real command line in a new
process on real SQLite files and must end with exit code 2, exactly one line ``error: ...``
on stderr naming what is wrong, no traceback, and every file as it was (same bytes, same
modification time, nothing created beside it). A full disk is a real tmpfs (when root):
the turn that finds it full fails cleanly and every turn committed before it is intact.
A bug, on the other hand, must keep its traceback: the boundary never hides one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.demo import Ledger, templates

from .support import cli

ROOT = os.geteuid() == 0


# -- running the command line -----------------------------------------------------------------


def assert_clean_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, one ``error:`` line on stderr that says each of ``fragments``, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def fingerprint(folder: Path) -> dict[str, tuple[int, int, int, str | None]]:
    """Every entry of ``folder``: mode, size, mtime and (for files) a hash of its bytes."""
    found: dict[str, tuple[int, int, int, str | None]] = {}
    for entry in sorted(os.listdir(folder)):
        where = folder / entry
        info = os.lstat(where)
        digest = None
        if stat.S_ISREG(info.st_mode):
            digest = hashlib.sha256(where.read_bytes()).hexdigest()
        found[entry] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return found


# -- a good store, to break in every way ------------------------------------------------------
@dataclass(frozen=True)
class Good:
    """A relaystate store with one open task, and a demo ledger with one effect."""

    db: bytes
    ledger: bytes
    task_id: str


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Good:
    folder = tmp_path_factory.mktemp("good")
    ledger = Ledger(folder / "ledger.db")
    ledger.apply("key-1", "order", {"amount": 1})
    with Runtime(open_store(f"sqlite:///{folder}/good.db"), templates(folder / "l.db")) as rt:
        task_id = rt.start(Scope.user("alice"), "flight_booking", slots={"origin": "Beijing"})
    assert not (folder / "good.db-wal").exists()  # closed: every page is in the file
    return Good(
        (folder / "good.db").read_bytes(), (folder / "ledger.db").read_bytes(), task_id.task.id
    )


@pytest.fixture
def undo() -> Iterator[contextlib.ExitStack]:
    """Clean-ups (unmounts, permissions) run after the test, whatever happened."""
    with contextlib.ExitStack() as stack:
        yield stack


def read_only(path: Path, undo: contextlib.ExitStack) -> None:
    """Make ``path`` (a file or directory) really read-only, for root too: a read-only bind
    mount when root, ``chmod a-w`` otherwise."""
    if not ROOT:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        undo.callback(path.chmod, mode)
        return
    done = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
    undo.callback(subprocess.run, ["umount", str(path)], check=True)
    done = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {done.stderr.decode().strip()}")


Build = Callable[[Path, Good, contextlib.ExitStack], Path]


def _write(data: bytes) -> Build:
    def build(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
        (d / "s.db").write_bytes(data)
        return d / "s.db"

    return build


def _good_with(change: Callable[[bytearray], None]) -> Build:
    def build(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
        data = bytearray(good.db)
        change(data)
        (d / "s.db").write_bytes(bytes(data))
        return d / "s.db"

    return build


def _zero_page(n: int) -> Callable[[bytearray], None]:
    def change(data: bytearray) -> None:
        start = 100 if n == 1 else (n - 1) * 4096  # page 1: keep the file header
        data[start : n * 4096] = bytes(n * 4096 - start)

    return change


def _cut(size: int) -> Callable[[bytearray], None]:
    def change(data: bytearray) -> None:
        del data[size:]

    return change


def _overwrite(offset: int, new: bytes) -> Callable[[bytearray], None]:
    def change(data: bytearray) -> None:
        data[offset : offset + len(new)] = new

    return change


def _sql(*statements: str) -> Build:
    """A copy of the good store changed by SQL (as another program could have)."""

    def build(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
        (d / "s.db").write_bytes(good.db)
        db = sqlite3.connect(d / "s.db")
        for statement in statements:
            db.execute(statement)
        db.commit()
        db.close()
        return d / "s.db"

    return build


def _directory(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    (d / "s.db").mkdir()
    return d / "s.db"


def _under_a_file(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    (d / "notes.txt").write_text("a file, not a folder\n")
    return d / "notes.txt" / "s.db"


def _fifo(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    os.mkfifo(d / "s.db")
    return d / "s.db"


def _socket(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    sock = socket.socket(socket.AF_UNIX)
    undo.callback(sock.close)
    sock.bind(str(d / "s.db"))
    return d / "s.db"


def _other_application(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    db = sqlite3.connect(d / "s.db")
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO customers (name) VALUES ('Ada')")
    db.commit()
    db.close()
    return d / "s.db"


def _wal_without_database(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    (d / "s.db-wal").write_bytes(os.urandom(4096))
    return d / "s.db"


def _symlink_loop(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    os.symlink(d / "s.db", d / "s.db")
    return d / "s.db"


def _dangling_symlink(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    os.symlink(d / "gone" / "s.db", d / "s.db")
    return d / "s.db"


def _name_too_long(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    return d / ("x" * 300 + ".db")


def _side_file_is_a_directory(suffix: str) -> Build:
    def build(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
        (d / "s.db").write_bytes(good.db)
        (d / f"s.db{suffix}").mkdir()
        return d / "s.db"

    return build


def _read_only_file(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    (d / "s.db").write_bytes(good.db)
    read_only(d / "s.db", undo)
    return d / "s.db"


def _read_only_directory(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    (d / "s.db").write_bytes(good.db)
    read_only(d, undo)
    return d / "s.db"


def _read_only_shm(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    """Permission denied on SQLite's -shm file (another user's, say): the database is fine."""
    (d / "s.db").write_bytes(good.db)
    (d / "s.db-shm").write_bytes(b"")
    read_only(d / "s.db-shm", undo)
    return d / "s.db"


def _dev_null(d: Path, good: Good, undo: contextlib.ExitStack) -> Path:
    return Path("/dev/null")


BAD_STORES: dict[str, tuple[Build, str]] = {
    # name: (how to make it, what the error must say)
    "a directory": (_directory, "is a directory"),
    "a text file": (_write(b"shopping list: eggs, milk\n" * 40), "not a SQLite file"),
    "random bytes": (_write(os.urandom(8192)), "not a SQLite file"),
    "/dev/null": (_dev_null, "character device"),
    "a FIFO": (_fifo, "FIFO"),
    "a socket": (_socket, "socket"),
    "a path under a regular file": (_under_a_file, "is a file, not a directory"),
    "zeros over the schema page": (_good_with(_zero_page(1)), "damaged"),
    "zeros over the meta page": (_good_with(_zero_page(2)), "damaged"),
    "truncated mid-page": (_good_with(_cut(3 * 4096 + 17)), "damaged"),
    "truncated at a page": (_good_with(_cut(8 * 4096)), "damaged"),
    "only the header": (_good_with(_cut(100)), "damaged"),
    "a bad header": (_good_with(_overwrite(0, b"SQLite format 4\0")), "not a SQLite file"),
    "an impossible page size": (_good_with(_overwrite(16, b"\0\3")), "damaged"),
    "another application's database": (_other_application, "not a relaystate database"),
    "a foreign meta table": (
        _sql("DROP TABLE meta", "CREATE TABLE meta (k, v)"),
        "not a relaystate database",
    ),
    "a schema version that is no number": (_sql("UPDATE meta SET value = 'x1'"), "damaged"),
    "a WAL file without its database": (_wal_without_database, "write-ahead log"),
    "a symlink loop": (_symlink_loop, "loop"),
    "a dangling symlink": (_dangling_symlink, "does not exist"),
    "a name too long": (_name_too_long, "too long"),
    "a directory where -shm goes": (_side_file_is_a_directory("-shm"), "is a directory"),
    "a directory where -wal goes": (_side_file_is_a_directory("-wal"), "is a directory"),
    "a read-only file": (_read_only_file, "read-only"),
    "a read-only directory": (_read_only_directory, "read-only"),
    "a read-only -shm file": (_read_only_shm, "cannot be written"),
}

COMMANDS: dict[str, tuple[list[str], str | None]] = {
    # name: (arguments, what goes to stdin); {task} is the good store's open task
    "say": (["say", "--user", "alice", "book a flight to Shanghai"], None),
    "chat": (["chat", "--user", "alice"], "hello\n"),
    "tasks list": (["tasks", "list", "--user", "alice"], None),
    "tasks show": (["tasks", "show", "{task}"], None),
    "tasks history": (["tasks", "history", "{task}"], None),
    "tasks resume": (["tasks", "resume", "{task}"], None),
    "tasks resolve": (["tasks", "resolve", "{task}", "1", "--failed"], None),
    "recover": (["recover"], None),
    "compact": (["compact", "--retention-days", "0"], None),
    "db status": (["db", "status"], None),
    "db upgrade": (["db", "upgrade"], None),
    "demo ledger": (["demo", "ledger"], None),
}
READ_ONLY = ("tasks list", "tasks show", "tasks history", "db status", "demo ledger")
"""Commands that only read; with ``tasks resume|resolve``, ``recover`` and ``compact`` they
need a store that exists (only say, chat and db upgrade may create one)."""


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("store", list(BAD_STORES))
def test_a_bad_store_file_is_one_clear_error_and_stays_untouched(
    store: str,
    command: str,
    good: Good,
    tmp_path: Path,
    undo: contextlib.ExitStack,
) -> None:
    build, says = BAD_STORES[store]
    folder = tmp_path / "case"
    folder.mkdir()
    path = build(folder, good, undo)
    args, stdin = COMMANDS[command]
    args = [a.replace("{task}", good.task_id) for a in args]
    before = fingerprint(folder)
    device = os.stat(path).st_rdev if str(path).startswith("/dev/") else None

    proc = cli(*args, "--store", f"sqlite:///{path}", cwd=folder, stdin=stdin)

    if command == "demo ledger":  # it reads the ledger beside the store, not the store
        assert_clean_error(proc, "ledger")
    else:
        line = assert_clean_error(proc, says)
        assert path.name[-40:] in line  # the message names the file
    assert fingerprint(folder) == before  # nothing written, created or removed
    if device is not None:
        assert os.stat(path).st_rdev == device


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ("say", "chat", "db upgrade")])
@pytest.mark.parametrize("shape", ["a missing file", "a missing directory", "an empty file"])
def test_only_commands_that_write_create_a_store(
    shape: str, command: str, good: Good, tmp_path: Path
) -> None:
    """A typo in --store is an error naming the path, never a new empty store that answers
    "No open tasks"; an empty file is no store either."""
    path = tmp_path / ("typo" if shape == "a missing directory" else "") / "stroe.db"
    if shape == "an empty file":
        path.write_bytes(b"")
    args, stdin = COMMANDS[command]
    args = [a.replace("{task}", good.task_id) for a in args]
    before = fingerprint(tmp_path)

    proc = cli(*args, "--store", f"sqlite:///{path}", cwd=tmp_path, stdin=stdin)

    if command == "demo ledger":
        assert_clean_error(proc, "no ledger at", "stroe-ledger.db")
    else:
        assert_clean_error(proc, str(path))
    assert fingerprint(tmp_path) == before


def test_say_creates_a_missing_store_and_its_directory(tmp_path: Path) -> None:
    proc = cli(
        "say", "--user", "alice", "hello", "--store", f"sqlite:///{tmp_path}/new/s.db", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "new" / "s.db").stat().st_size > 0
    assert not (tmp_path / "new" / "s-ledger.db").exists()  # made by its first request


# -- the demo ledger --------------------------------------------------------------------------
def _ledger_file(data: Callable[[Good], bytes]) -> Callable[[Path, Good], Path]:
    def build(d: Path, good: Good) -> Path:
        (d / "l.db").write_bytes(data(good))
        return d / "l.db"

    return build


def _ledger_directory(d: Path, good: Good) -> Path:
    (d / "l.db").mkdir()
    return d / "l.db"


def _ledger_under_a_file(d: Path, good: Good) -> Path:
    (d / "notes.txt").write_text("a file, not a folder\n")
    return d / "notes.txt" / "l.db"


BAD_LEDGERS: dict[str, tuple[Callable[[Path, Good], Path], str]] = {
    "a directory": (_ledger_directory, "is a directory"),
    "a text file": (_ledger_file(lambda g: b"not a ledger\n" * 20), "not a SQLite file"),
    "/dev/null": (lambda d, g: Path("/dev/null"), "character device"),
    "a path under a regular file": (_ledger_under_a_file, "is a file, not a directory"),
    "the relaystate store": (lambda d, g: d / "store.db", "not a relaystate demo ledger"),
    "a damaged ledger": (
        _ledger_file(lambda g: g.ledger[:100] + bytes(3996) + g.ledger[4096:]),
        "damaged",
    ),
}


@pytest.mark.parametrize("command", ["say", "tasks show", "demo ledger", "recover"])
@pytest.mark.parametrize("ledger", list(BAD_LEDGERS))
def test_a_bad_ledger_is_one_clear_error(
    ledger: str, command: str, good: Good, tmp_path: Path
) -> None:
    (tmp_path / "store.db").write_bytes(good.db)
    build, says = BAD_LEDGERS[ledger]
    path = build(tmp_path, good)
    args, stdin = COMMANDS[command]
    args = [a.replace("{task}", good.task_id) for a in args]
    before = fingerprint(tmp_path)

    proc = cli(
        *args,
        "--store",
        f"sqlite:///{tmp_path}/store.db",
        "--ledger",
        str(path),
        cwd=tmp_path,
        stdin=stdin,
    )

    assert_clean_error(proc, says, "ledger")
    assert fingerprint(tmp_path) == before


# -- settings: environment variables and options ----------------------------------------------
SETTINGS: dict[str, tuple[dict[str, str], list[str], str]] = {
    # name: (environment, arguments, what the error must say)
    "failpoints that do not parse": (
        {"RELAYSTATE_FAILPOINTS": "garbage"},
        ["tasks", "list", "--user", "a"],
        "RELAYSTATE_FAILPOINTS",
    ),
    "a failpoint nowhere": (
        {"RELAYSTATE_FAILPOINTS": "nowhere=crash"},
        ["say", "--user", "a", "hi"],
        "unknown point",
    ),
    "a failpoint sleeping forever": (
        {"RELAYSTATE_FAILPOINTS": "before_commit=sleep=inf"},
        ["say", "--user", "a", "hi"],
        "sleep takes",
    ),
    "a failpoint sleeping backwards": (
        {"RELAYSTATE_FAILPOINTS": "after_record=sleep=-1"},
        ["say", "--user", "a", "hi"],
        "sleep takes",
    ),
    "the clock near year 1": (
        {"RELAYSTATE_NOW": "0001-01-01T00:00:00"},
        ["say", "--user", "a", "book a flight yesterday"],
        "RELAYSTATE_NOW",
    ),
    "the clock near year 9999": (
        {"RELAYSTATE_NOW": "9999-12-31T23:59:59"},
        ["say", "--user", "a", "book a flight tomorrow"],
        "RELAYSTATE_NOW",
    ),
    "the clock west of year 1": (
        {"RELAYSTATE_NOW": "0001-01-01T00:00:00+14:00"},
        ["say", "--user", "a", "hi"],
        "out of range",
    ),
    "a clock that is no time": (
        {"RELAYSTATE_NOW": "teatime"},
        ["say", "--user", "a", "hi"],
        "not an ISO",
    ),
    "retention 1e10 days": ({}, ["compact", "--retention-days", "1e10"], "--retention-days"),
    "retention infinite": ({}, ["compact", "--retention-days", "inf"], "--retention-days"),
    "retention not a number": ({}, ["compact", "--retention-days", "nan"], "--retention-days"),
    "retention negative": ({}, ["compact", "--retention-days", "-1"], "--retention-days"),
    "an --app returning text": (
        {},
        ["say", "--user", "a", "hi", "--app", "os:getcwd"],
        "not TaskTemplates",
    ),
    "an --app returning None": (
        {},
        ["say", "--user", "a", "hi", "--app", "builtins:print"],
        "not TaskTemplates",
    ),
    "an --app that raises": ({}, ["say", "--user", "a", "hi", "--app", "json:loads"], "TypeError"),
    "an --app not callable": (
        {},
        ["say", "--user", "a", "hi", "--app", "math:pi"],
        "not TaskTemplates",
    ),
    "an --app of strings": (
        {},
        ["tasks", "show", "{task}", "--app", "badapp:names"],
        "not a TaskTemplate",
    ),
    "an --app that exits": ({}, ["tasks", "show", "{task}", "--app", "badapp:leave"], "SystemExit"),
    "an --app giving nothing": (
        {},
        ["say", "--user", "a", "hi", "--app", "badapp:nothing"],
        "no TaskTemplates",
    ),
    "an --app that does not compile": (
        {},
        ["say", "--user", "a", "hi", "--app", "broken:x"],
        "SyntaxError",
    ),
    "an --app relative name": (
        {},
        ["say", "--user", "a", "hi", "--app", "..up:x"],
        "importable module",
    ),
    "empty text": ({}, ["say", "--user", "a", "   "], "nothing to say"),
    "a --dir that is a file": ({}, ["demo", "run", "--dir", "badapp.py"], "--dir"),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_bad_setting_is_one_clear_error(setting: str, good: Good, tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(good.db)
    (tmp_path / "badapp.py").write_text(
        "def names():\n    return ['flight', 'refund']\n\n"
        "def leave():\n    raise SystemExit(0)\n\n"
        "def nothing():\n    return []\n"
    )
    (tmp_path / "broken.py").write_text("def x(:\n")
    env, args, says = SETTINGS[setting]
    args = [a.replace("{task}", good.task_id) for a in args]
    if args[:2] != ["demo", "run"]:
        args += ["--store", f"sqlite:///{tmp_path}/s.db"]
    before = (tmp_path / "s.db").read_bytes()

    assert_clean_error(cli(*args, cwd=tmp_path, env=env), says)
    assert (tmp_path / "s.db").read_bytes() == before


# -- a full disk ------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB file system (tmpfs), so that a write really meets a full disk."""
    if not ROOT:
        pytest.skip("mounting a small tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(folder: Path, leave: int) -> Path:
    """Take every free byte of ``folder``'s file system but ``leave``; returns the filler."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(64 * 1024))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(os.path.getsize(filler) - leave, 0))
    return filler


def test_a_full_disk_stops_say_and_compact_cleanly_and_loses_nothing(small_disk: Path) -> None:
    store = f"sqlite:///{small_disk}/s.db"
    first = cli(
        "say",
        "--user",
        "alice",
        "--session",
        "s1",
        "book a flight from Beijing to Shanghai",
        "--store",
        store,
        "--json",
        cwd=small_disk,
    )
    assert first.returncode == 0, first.stderr
    task_id = json.loads(first.stdout)["task"]["id"]
    filler = fill(small_disk, leave=200 * 1024)

    said: list[str] = []
    for n in range(60):  # each turn adds a few pages: the disk fills within a few dozen
        text = f"note {n} " + "x" * 3000
        proc = cli(
            "say", "--user", "alice", "--session", "s1", text, "--store", store, cwd=small_disk
        )
        if proc.returncode != 0:
            break
        said.append(text)
    else:
        pytest.fail("the disk never filled")
    assert said, "the disk was full before the first turn: nothing shows what was kept"
    assert_clean_error(proc, "disk full", str(small_disk / "s.db"))
    # a turn's one transaction carries its memory items too: it can fail where a smaller
    # write (a compaction of one entry) still fits, so the last bytes go as well
    fill(small_disk, leave=0)
    assert_clean_error(
        cli("compact", "--retention-days", "0", "--store", store, cwd=small_disk), "disk full"
    )

    filler.unlink()
    db = sqlite3.connect(small_disk / "s.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = [
            r[0] for r in db.execute("SELECT text FROM messages WHERE role = 'user' ORDER BY id")
        ]
    finally:
        db.close()
    assert kept == [
        "book a flight from Beijing to Shanghai",
        *said,
    ]  # every committed turn, not the failed one
    history = cli("tasks", "history", task_id, "--store", store, "--json", cwd=small_disk)
    assert history.returncode == 0 and json.loads(history.stdout)["entries"], history.stderr
    assert cli("compact", "--retention-days", "0", "--store", store, cwd=small_disk).returncode == 0
    again = cli(
        "say", "--user", "alice", "--session", "s1", "hello again", "--store", store, cwd=small_disk
    )
    assert again.returncode == 0, again.stderr  # full service once there is room


# -- damage only some commands meet -----------------------------------------------------------
def test_a_zeroed_table_page_is_reported_by_the_commands_that_read_it(
    good: Good, tmp_path: Path
) -> None:
    (tmp_path / "s.db").write_bytes(good.db)
    db = sqlite3.connect(tmp_path / "s.db")
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tasks'").fetchone()
    db.close()
    _write(bytes(_zeroed(good.db, root)))(tmp_path, good, contextlib.ExitStack())
    before = fingerprint(tmp_path)
    for args in (["tasks", "list", "--user", "alice"], ["tasks", "show", good.task_id]):
        assert_clean_error(
            cli(*args, "--store", f"sqlite:///{tmp_path}/s.db", cwd=tmp_path),
            "damaged",
            "malformed",
        )
    assert fingerprint(tmp_path) == before


def _zeroed(data: bytes, page: int) -> bytearray:
    changed = bytearray(data)
    changed[(page - 1) * 4096 : page * 4096] = bytes(4096)
    return changed


# -- the output ---------------------------------------------------------------------------------
def test_a_full_output_is_one_clear_error(good: Good, tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(good.db)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "relaystate.cli",
                "tasks",
                "list",
                "--user",
                "alice",
                "--json",
                "--store",
                f"sqlite:///{tmp_path}/s.db",
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )
    assert_clean_error(proc, "No space left on device")


def test_an_ascii_terminal_gets_escapes_not_an_error(good: Good, tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(good.db)
    proc = cli(
        "say",
        "--user",
        "alice",
        "帮我订一张去上海的机票",
        "--store",
        f"sqlite:///{tmp_path}/s.db",
        cwd=tmp_path,
        env={"PYTHONIOENCODING": "ascii"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "\\u" in proc.stdout


# -- a bug keeps its traceback ------------------------------------------------------------------
@pytest.mark.parametrize(
    "bug",
    [
        ValueError("a bug"),
        KeyError("a bug"),
        OSError(errno.ENOENT, "a bug"),
        sqlite3.ProgrammingError("a bug"),
        sqlite3.OperationalError("no such table: a_bug"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_boundary_never_hides_a_bug(
    bug: Exception, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from relaystate import cli as entry
    from relaystate.cli import tasks as tasks_command

    def broken(ns: object) -> None:
        raise bug

    monkeypatch.setattr(tasks_command, "list_tasks", broken)
    with pytest.raises(type(bug)):
        entry.main(["tasks", "list", "--user", "a", "--store", f"sqlite:///{tmp_path}/s.db"])


def test_a_deliberate_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from relaystate import cli as entry
    from relaystate.cli import tasks as tasks_command
    from relaystate.errors import StoreFull

    def full(ns: object) -> None:
        raise StoreFull("x.db", "disk full:\nno space\n  left")

    monkeypatch.setattr(tasks_command, "list_tasks", full)
    with pytest.raises(SystemExit) as exit_:
        entry.main(["tasks", "list", "--user", "a", "--store", f"sqlite:///{tmp_path}/s.db"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "error: disk full: no space left\n"
