"""Store backends by role, opened by URL: ``open_store(url, cache=...) -> Stores``."""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from pathlib import PurePath
from urllib.parse import SplitResult, parse_qs, urlsplit

from ..errors import RelaystateError, StoreUnavailable, StoreURLError
from .bundle import Stores
from .inmemory import InMemoryStore
from .roles import (
    Backend,
    Commit,
    Coordination,
    Identities,
    Memories,
    SchemaAdmin,
    SessionStore,
    TaskStore,
    WorkingMemory,
)
from .sqlite import files as sqlite_files
from .sqlite.store import SQLiteStore

__all__ = [
    "Backend",
    "Commit",
    "Coordination",
    "Identities",
    "InMemoryStore",
    "Memories",
    "SQLiteStore",
    "SchemaAdmin",
    "SessionStore",
    "Stores",
    "TaskStore",
    "WorkingMemory",
    "open_backend",
    "open_store",
    "shown_url",
    "split_url",
    "translate_error",
]


def open_store(
    url: str, *, cache: str | None = None, migrate: bool = True, create: bool = True
) -> Stores:
    """Open the store roles by URL, optionally with a session cache in front of them.

    ``memory://``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (with
    ``?synchronous=normal`` to trade power-cut durability for speed); ``postgresql://...``.
    ``cache`` is a ``redis://`` URL: hot sessions and recent messages with a TTL.
    SQL stores apply pending schema migrations on open unless ``migrate`` is false.
    ``create=False`` is for callers that only read: a SQLite file that does not exist (or
    is empty) is then :class:`~relaystate.errors.StoreMissing` naming it, not a new store.
    """
    if cache:  # a bad cache URL is refused before the store is opened
        scheme = split_url(cache, what="cache", port=True).scheme
        if scheme not in ("redis", "rediss"):
            raise StoreURLError(
                f"unknown cache URL {shown_url(cache)!r}: expected redis://host:port/db"
            )
    backend = open_backend(url, migrate=migrate, create=create)
    if not cache:
        return Stores.of(backend)
    from .redis import RedisSessionCache

    try:
        return Stores.of(backend, sessions=RedisSessionCache(backend, cache))
    except BaseException:
        backend.close()
        raise


def open_backend(url: str, *, migrate: bool = True, create: bool = True) -> Backend:
    """The one database a URL names, playing every role it can (``create``: see
    :func:`open_store`; a server database is never created, whatever it says)."""
    parts = split_url(url)
    if parts.scheme == "memory":
        return InMemoryStore(url)
    if parts.scheme == "sqlite":
        path = sqlite_path(url)
        if parts.netloc or not path:
            raise StoreURLError(
                f"bad SQLite store URL {url!r}: use sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db"
            )
        if parts.fragment:
            raise StoreURLError(
                f"bad SQLite store URL {url!r}: '#' starts a URL fragment, so the file would "
                f"be {path!r}; rename the file without '#'"
            )
        options = parse_qs(parts.query)
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise StoreURLError(f"unknown SQLite store option(s): {', '.join(sorted(unknown))}")
        synchronous = options.get("synchronous", ["full"])[-1]
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise StoreURLError("synchronous must be FULL, NORMAL or EXTRA")
        _check_relative(url, path)
        # SQLite's own answer to a bad file is "unable to open database file", without the
        # path: look first, then translate what SQLite still says (full, corrupt pages...).
        sqlite_files.check_path(path, create=create)
        with sqlite_files.translated(path):
            return SQLiteStore(path, synchronous=synchronous, migrate=migrate)
    if parts.scheme in ("postgresql", "postgres"):
        try:
            from .postgres.store import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise StoreURLError(
                f"PostgreSQL stores need {exc.name}: pip install 'relaystate[postgres]'"
            ) from None
        return PostgresStore(url, migrate=migrate)
    raise StoreURLError(
        f"unknown store URL {shown_url(url)!r}: expected memory://, sqlite:///path.db or postgresql://..."
    )


def _check_relative(url: str, path: str) -> None:
    """``sqlite:///tmp/x.db`` is the relative path ``tmp/x.db`` (three slashes; an absolute
    path takes four): refused when no ``tmp/`` is here but ``/tmp`` exists, the one case
    where the URL almost surely means the absolute file (it would make a new ``./tmp``)."""
    parts = PurePath(path).parts
    if PurePath(path).is_absolute() or len(parts) < 2 or path.startswith(("./", "../")):
        return
    if not os.path.lexists(parts[0]) and os.path.isdir(os.path.join(os.sep, parts[0])):
        raise StoreURLError(
            f"{url!r} names the relative path {path} (there is no {parts[0]}/ here); for the "
            f"file /{path} write sqlite:////{path} (four slashes), for a new folder here "
            f"sqlite:///./{path}"
        )


def split_url(url: str, *, what: str = "store", port: bool = False) -> SplitResult:
    """``urlsplit``, but what it cannot parse (an unclosed IPv6 bracket, and with ``port``
    a port that is no number from 0 to 65535) is a StoreURLError naming the URL, not the
    bare ValueError Python raises (a traceback at the command line). ``port`` is for
    one-host URLs: a PostgreSQL URL may list several ``host:port`` pairs, which libpq
    checks itself."""
    try:
        parts = urlsplit(url)
        if port:
            parts.port  # noqa: B018 - reading it is the check
    except ValueError as exc:
        raise StoreURLError(f"bad {what} URL {shown_url(url)!r}: {exc}") from None
    return parts


_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@\[\]]*):[^@/]*@")


def shown_url(url: str) -> str:
    """A URL fit for messages: without its password (read without parsing the URL, which
    may be the very thing that is wrong), and cut when very long."""
    url = _PASSWORD.sub(r"\1:***@", url)
    url = re.sub(r"([?&]password=)[^&]*", r"\1***", url)
    return url if len(url) <= 200 else url[:197] + "..."


def sqlite_path(url: str) -> str | None:
    """The file a ``sqlite:///`` URL names (None for another scheme, or no URL at all)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "sqlite":
        return None
    return parts.path[1:] if parts.path.startswith("/") else parts.path


def translate_error(exc: BaseException, url: str) -> RelaystateError | None:
    """The typed error for a driver failure met while using the store at ``url``: a full
    disk, a corrupt or read-only SQLite file, a database server gone away. None when ``exc``
    is no such failure: a bug, which an entry point must show as it is, not as a user error.

    For the error boundary of an entry point (the CLI's ``main``): failures the backends
    already translate where they happen arrive typed and never reach this.
    """
    if isinstance(exc, sqlite3.Error):
        return sqlite_files.translate(exc, sqlite_path(url) or "(a SQLite database)")
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return StoreUnavailable(f"the PostgreSQL store stopped answering: {reason}")
    pool = sys.modules.get("psycopg_pool")
    if pool is not None and isinstance(exc, pool.PoolTimeout):
        return StoreUnavailable(f"no PostgreSQL connection became free in time: {exc}")
    redis = sys.modules.get("redis")
    if redis is not None and isinstance(
        exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError
    ):
        return StoreUnavailable(f"the Redis session cache stopped answering: {exc}")
    return None
