"""Can SQLite use this file as a relaystate database? Checked before connecting; and SQLite's
own failures turned into the typed errors of :mod:`relaystate.errors`.

SQLite answers a directory, a text file, ``/dev/null``, a FIFO or a read-only directory with
"unable to open database file" or "disk I/O error" from the first statement, without naming
the file, and a full disk with "database or disk is full". A person needs which file, what is
wrong with it and what to do. :func:`check_path` only looks (``stat``, ``access`` and the
100-byte header): it never creates, locks or writes anything, and never opens a FIFO or a
device. :func:`check_tables` runs on the store's own connection before it switches the file
to WAL, so another application's database is refused before relaystate writes to it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import threading
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from ...errors import (
    RelaystateError,
    StoreCorrupt,
    StoreFileError,
    StoreFull,
    StoreMissing,
    StoreNotDatabase,
    StoreReadOnly,
    StoreUnavailable,
)

__all__ = [
    "check_pages",
    "check_path",
    "check_tables",
    "connect",
    "damaged",
    "finish",
    "rollback",
    "translate",
    "translated",
]

CHECK_PAGES_UP_TO = 16 * 1024 * 1024
"""Files up to this size are read whole when opened, to find a damaged page at once (a
16 MB store takes about 15 ms; see :func:`check_pages`)."""
MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
_SIDE_FILES = {"-wal": "write-ahead log", "-shm": "shared-memory index", "-journal": "journal"}
_WHAT = {"store": "a relaystate database", "ledger": "a relaystate demo ledger"}
_READONLY_DBMOVED = sqlite3.SQLITE_READONLY | (4 << 8)
"""SQLITE_READONLY_DBMOVED: the file was renamed or deleted while it was open."""


# -- connections this process has open -----------------------------------------------------
# SQLite locks a database file with POSIX advisory locks, which belong to the process, and
# closing *any* descriptor of the file drops them all (fcntl(2)): a connection of another
# thread would lose its SHARED lock while it still works. In WAL mode that lock is what
# tells another process's closing connection that it is not the last one; without it, that
# process checkpoints and deletes the -wal and -shm files under the open connection, whose
# next COMMIT "succeeds" into the deleted log and is lost (and the connections of this
# process share the stale wal-index: I/O errors, damaged pages). SQLite never closes a
# descriptor of a file it has locked; neither may relaystate: while this process has a
# connection open on a file (:func:`connect` counts them), :func:`check_path` does not open
# that file to read its header (the open connection shows SQLite accepted it), and a header
# read and a new connection never overlap.
_HELD_LOCK = threading.Lock()
_HELD: Counter[str] = Counter()
"""Real path -> SQLite connections this process has open on it (through :func:`connect`)."""


def _held_key(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _release(key: str) -> None:
    with _HELD_LOCK:
        _HELD[key] -= 1
        if _HELD[key] <= 0:
            del _HELD[key]


class _HeldConnection(sqlite3.Connection):
    """A connection counted in ``_HELD`` until it is closed."""

    _held_key: str | None = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            key, self._held_key = self._held_key, None
            if key is not None:
                _release(key)


def connect(path: str | os.PathLike[str], **kwargs: object) -> sqlite3.Connection:
    """``sqlite3.connect`` for a database file, counted until it is closed (see above)."""
    key = _held_key(path)
    with _HELD_LOCK:
        _HELD[key] += 1
    try:
        db = sqlite3.connect(os.fspath(path), factory=_HeldConnection, **kwargs)  # type: ignore[call-overload]
    except BaseException:
        _release(key)
        raise
    assert isinstance(db, _HeldConnection)
    db._held_key = key
    return db


def check_path(path: str | os.PathLike[str], *, create: bool, what: str = "store") -> None:
    """Refuse, naming the file, a path SQLite cannot use as a database.

    ``create``: a missing (or empty) file may become a new database, as commands that write
    may do; when false a missing or empty file is an error, as a read never creates a store.
    ``what`` is the file's role in messages: "store" or "ledger".
    """
    name = os.fspath(path)
    if name == ":memory:":
        return
    if "\x00" in name:
        raise StoreFileError(name, f"the {what} path contains a NUL character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreFileError(
            name, f"the {what} path {_show(name)} is not valid UTF-8, which SQLite needs: rename it"
        ) from None
    try:
        found = os.stat(name)
    except FileNotFoundError:
        _check_missing(name, create=create, what=what)
        return
    except OSError as exc:
        raise _lookup_error(name, exc, what) from None
    if stat.S_ISDIR(found.st_mode):
        raise StoreFileError(
            name,
            f"the {what} {_show(name)} is a directory, not a database file: name a file "
            f"inside it, such as {_show(os.path.join(name, 'relaystate.db'))}",
        )
    if not stat.S_ISREG(found.st_mode):
        raise StoreFileError(
            name,
            f"the {what} {_show(name)} is {_kind(found.st_mode)}, not a regular file: "
            f"a {what} is a database file",
        )
    if not os.access(name, os.R_OK):
        raise StoreFileError(name, f"cannot read the {what} {_show(name)}: permission denied")
    _check_side_files(name, what)
    _check_header(name, found.st_size, create=create, what=what)
    _check_writable(name, what=what)


def check_tables(
    db: sqlite3.Connection,
    path: str | os.PathLike[str],
    *,
    expected: Collection[str] = ("meta",),
    what: str = "store",
) -> None:
    """Refuse a database that has tables but not ``expected`` ones: another application's
    (or the store given as the ledger, or the other way round). An empty database passes.

    Runs on the caller's connection before anything is written, so nothing is changed."""
    name = os.fspath(path)
    tables = sorted(
        str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    )
    if not tables or set(expected) <= set(tables):
        if "meta" in expected and tables:
            _check_meta(db, name, what)
        return
    shown = ", ".join(tables[:6]) + (", ..." if len(tables) > 6 else "")
    raise StoreNotDatabase(
        name,
        f"the {what} {_show(name)} is not {_WHAT.get(what, 'a relaystate database')}: it is "
        f"a SQLite database of something else (tables: {shown}); nothing was changed, "
        f"point the {what} at another file",
    )


def _check_meta(db: sqlite3.Connection, name: str, what: str) -> None:
    """relaystate's ``meta`` table holds a whole-number schema version (written in the same
    transaction that creates it); anything else is someone else's table or damage."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is None:
        raise StoreNotDatabase(
            name,
            f"the {what} {_show(name)} is not a relaystate database: its meta table is not "
            f"relaystate's (no schema version); nothing was changed",
        )
    if not (str(row[0]).isascii() and str(row[0]).isdigit()):
        raise StoreCorrupt(
            name,
            f"the {what} {_show(name)} is damaged: its schema version is {str(row[0])[:40]!r}, "
            f"not a number; restore it from a backup",
        )


@contextmanager
def translated(path: str | os.PathLike[str], *, what: str = "store") -> Iterator[None]:
    """Raise SQLite's failures of the environment (full, read-only, corrupt, missing...) as
    the typed error naming ``path``; anything else (a bug) passes through unchanged."""
    try:
        yield
    except sqlite3.Error as exc:
        mapped = translate(exc, path, what=what)
        if mapped is None:
            raise
        raise mapped from exc


def translate(
    exc: sqlite3.Error, path: str | os.PathLike[str], *, what: str = "store"
) -> RelaystateError | None:
    """The typed error for a failure SQLite reported about the file at ``path``, or None when
    ``exc`` is not about the environment (a wrong statement, a constraint: a bug to show)."""
    name = os.fspath(path)
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    primary = code & 0xFF
    said = str(exc)
    shown = _show(name)
    if primary == sqlite3.SQLITE_FULL:
        return _full(name, what)
    if code == _READONLY_DBMOVED:
        return StoreFileError(
            name,
            f"the {what} {shown} was moved or deleted while in use: the change was not "
            f"written; put it back and run the command again",
        )
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StoreReadOnly(
            name,
            f"the {what} {shown} is read-only (SQLite: {said}): the change was not written; "
            f"make the file and its directory writable, or use a copy",
        )
    if primary == sqlite3.SQLITE_CORRUPT:
        return damaged(name, said, what=what)
    if primary == sqlite3.SQLITE_NOTADB:
        return StoreNotDatabase(
            name,
            f"the {what} {shown} is not {_WHAT.get(what, 'a relaystate database')} (SQLite: "
            f"{said}): the command stopped there; check the path",
        )
    if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_NOLFS):
        # A full disk can surface as an I/O error (growing the -shm file), and the path may
        # have changed since it was checked: say precisely what is wrong now.
        if _out_of_space(name):
            return _full(name, what)
        try:
            check_path(name, create=True, what=what)
        except StoreFileError as precise:
            return precise
        return StoreFileError(
            name,
            f"SQLite cannot use the {what} {shown} ({said}): the command stopped there; check "
            f"the file, its directory and the disk",
        )
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL):
        return StoreUnavailable(
            f"the {what} {shown} stayed locked by another process (SQLite: {said}): the "
            f"change was not made; run the command again when that process is done"
        )
    return None


def damaged(name: str, said: str, *, what: str = "store") -> StoreCorrupt:
    """The error for a damaged file, naming it, with what SQLite said and what to do."""
    shown = _show(name)
    return StoreCorrupt(
        name,
        f"the {what} {shown} is damaged (SQLite: {said}): the command stopped there; "
        f"restore it from a backup, or try `sqlite3 {shown} .recover` on a copy",
    )


def check_pages(
    db: sqlite3.Connection,
    path: str | os.PathLike[str],
    *,
    what: str = "store",
    limit: int | None = None,
) -> None:
    """Read every page of a file of up to ``limit`` bytes (with its -wal) through SQLite's
    ``PRAGMA quick_check`` and refuse a damaged one, before anything is written: a zeroed
    page of a table no command of this run reads would otherwise pass unnoticed. A larger
    file is not read whole on every open (about 1 ms per MB): there, damage is the typed
    error of the first command that reads the page (``limit``: default
    :data:`CHECK_PAGES_UP_TO`)."""
    name = os.fspath(path)
    most = CHECK_PAGES_UP_TO if limit is None else limit
    if name == ":memory:" or _size(name) + _size(name + "-wal") > most:
        return
    found = [str(row[0]) for row in db.execute("PRAGMA quick_check(3)").fetchall()]
    if found != ["ok"]:
        detail = "; ".join(" ".join(line.split()) for line in found)
        raise damaged(name, f"database disk image is malformed: {detail[:300]}", what=what)


def _size(name: str) -> int:
    try:
        return os.path.getsize(name)
    except OSError:
        return 0


def _full(name: str, what: str) -> StoreFull:
    return StoreFull(
        name,
        f"disk full: the file system holding the {what} {_show(name)} has no space left; "
        f"the change in progress was not written (what was committed before it is intact): "
        f"free some space and run the command again",
    )


def _out_of_space(name: str) -> bool:
    """Less room than a few pages left where the file lives (or its quota)."""
    try:
        found = os.statvfs(os.path.dirname(os.path.abspath(name)))
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < 64 * 1024


def rollback(db: sqlite3.Connection) -> None:
    """ROLLBACK if a transaction is still open: SQLite ends it by itself after some failures
    (a full disk, an I/O error), and a second error must not hide the first."""
    if db.in_transaction:
        # The error being raised says more; closing the connection rolls back anyway.
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def finish(db: sqlite3.Connection) -> None:
    """COMMIT; when that fails (a full disk), roll back so that nothing half-done stays
    pending on the connection, and raise the failure."""
    try:
        db.execute("COMMIT")
    except BaseException:
        rollback(db)
        raise


# -- the checks before connecting --------------------------------------------------------
def _check_missing(name: str, *, create: bool, what: str) -> None:
    if os.path.islink(name):
        raise StoreFileError(
            name,
            f"the {what} {_show(name)} is a symbolic link to {_show(os.readlink(name))}, "
            f"which does not exist",
        )
    if os.path.lexists(name + "-wal"):
        raise StoreFileError(
            name,
            f"the {what} {_show(name)} does not exist but its write-ahead log "
            f"{_show(name + '-wal')} does: the database was moved or deleted without it; "
            f"put the database file back (or remove the stale -wal file)",
        )
    if not create:
        raise StoreMissing(
            name,
            f"no {what} at {_show(name)}: the file does not exist (nothing was created: "
            f"only commands that write start a new {what}); check the path",
        )
    parent = _nearest_existing(name)
    if not os.path.isdir(parent):
        raise StoreFileError(
            name, f"cannot create the {what} {_show(name)}: {_show(parent)} is not a directory"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreReadOnly(
            name,
            f"cannot create the {what} {_show(name)}: the directory {_show(parent)} is "
            f"read-only; nothing was written",
        )


def _lookup_error(name: str, exc: OSError, what: str) -> StoreFileError:
    """What a failed ``stat`` of the path means, in words."""
    shown = _show(name)
    if exc.errno == errno.ENOTDIR:
        blocker = _nearest_existing(name)
        return StoreFileError(
            name, f"cannot use the {what} {shown}: {_show(blocker)} is a file, not a directory"
        )
    if exc.errno == errno.ELOOP:
        return StoreFileError(
            name, f"cannot open the {what} {shown}: its symbolic links form a loop"
        )
    if exc.errno == errno.ENAMETOOLONG:
        return StoreFileError(
            name, f"cannot use the {what} {shown}: the path is too long for the file system"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return StoreFileError(
            name, f"cannot reach the {what} {shown}: permission denied on its directory"
        )
    return StoreFileError(name, f"cannot use the {what} {shown}: {exc.strerror}")


def _check_side_files(name: str, what: str) -> None:
    """SQLite's files beside the database must be files it can write, or absent."""
    for suffix, role in _SIDE_FILES.items():
        side = name + suffix
        try:
            found = os.stat(side)
        except FileNotFoundError:
            if os.path.islink(side):
                raise StoreFileError(
                    name, f"{_show(side)} is a dangling symbolic link, not SQLite's {role}"
                ) from None
            continue
        except OSError as exc:
            raise _lookup_error(side, exc, what) from None
        if not stat.S_ISREG(found.st_mode):
            raise StoreFileError(
                name,
                f"{_show(side)} is {_kind(found.st_mode)}, not SQLite's {role} of the {what} "
                f"{_show(name)}: remove it (with no process using the {what})",
            )
        if not os.access(side, os.R_OK | os.W_OK):
            raise StoreReadOnly(
                name,
                f"SQLite's {role} {_show(side)} of the {what} cannot be written (another "
                f"user's, or a read-only file system): nothing was written; fix its owner or "
                f"permissions",
            )


def _check_header(name: str, size: int, *, create: bool, what: str) -> None:
    """The 100-byte header: SQLite's magic, a sane page size, a file as long as it says."""
    shown = _show(name)
    noun = _WHAT.get(what, "a relaystate database")
    if size == 0:
        if create or _has_log(name):
            return  # SQLite makes an empty file a new database (or reads its -wal)
        raise StoreNotDatabase(name, f"the {what} {shown} is an empty file, not {noun}")
    with _HELD_LOCK:  # no connection of this process opens while the file is open here
        if _HELD[_held_key(name)]:
            return  # SQLite has it open in this process: closing a descriptor would unlock it
        with open(name, "rb") as f:
            head = f.read(100)
    if not head.startswith(MAGIC):
        raise StoreNotDatabase(
            name, f"the {what} {shown} is not {noun}: it is not a SQLite file; check the path"
        )
    if len(head) < 100:
        raise StoreCorrupt(
            name, f"the {what} {shown} is damaged: it ends inside its 100-byte header"
        )
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise StoreCorrupt(
            name,
            f"the {what} {shown} is damaged: its header gives an impossible page size "
            f"({page}); restore it from a backup",
        )
    if size % page:
        raise StoreCorrupt(
            name,
            f"the {what} {shown} is damaged: it is not a whole number of {page}-byte pages "
            f"({size} bytes), so it was cut short; restore it from a backup",
        )
    pages = int.from_bytes(head[28:32], "big")
    counted = pages > 0 and head[24:28] == head[92:96]  # SQLite's own validity rule
    if counted and not _has_log(name) and size < pages * page:
        raise StoreCorrupt(
            name,
            f"the {what} {shown} is damaged: it is {size} bytes but its header says "
            f"{pages * page}, so it was cut short; restore it from a backup",
        )
    if not create and counted and pages <= 1 and not _has_log(name):
        raise StoreNotDatabase(
            name, f"the {what} {shown} is an empty SQLite database (no tables), not {noun}"
        )


def _check_writable(name: str, *, what: str) -> None:
    """The file writable, as every command opens it for writing (schema upgrades, WAL mode);
    and its directory, for the -wal and -shm files that WAL mode keeps beside it even to
    read (unless both are there already)."""
    shown = _show(name)
    if not os.access(name, os.W_OK):
        raise StoreReadOnly(
            name,
            f"the {what} {shown} is read-only: nothing was written; relaystate opens it for "
            f"writing: make it writable, or point the {what} at a copy",
        )
    folder = os.path.dirname(os.path.abspath(name))
    if os.access(folder, os.W_OK | os.X_OK):
        return
    if all(os.path.isfile(name + s) for s in ("-wal", "-shm")):
        return
    raise StoreReadOnly(
        name,
        f"the directory {_show(folder)} of the {what} {shown} is read-only, and SQLite keeps "
        f"its -wal and -shm files beside the database, even to read it: nothing was written; "
        f"make the directory writable, or copy the database somewhere writable",
    )


def _has_log(name: str) -> bool:
    """A non-empty -wal file: pages newer than the database file may live there."""
    try:
        return os.path.getsize(name + "-wal") > 0
    except OSError:
        return False


def _nearest_existing(name: str) -> str:
    """The longest leading part of ``name`` that exists (a file where a directory is needed,
    or the directory a new file would go in)."""
    here = os.path.abspath(name)
    while True:
        parent = os.path.dirname(here)
        if parent == here or os.path.lexists(parent):
            return parent
        here = parent


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _show(name: str) -> str:
    """A path as a message shows it: whole when short, its ends when very long."""
    return name if len(name) <= 160 else f"{name[:80]}...{name[-60:]}"
