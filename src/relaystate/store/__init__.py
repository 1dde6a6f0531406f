"""Store backends by role, opened by URL: ``open_store(url, cache=...) -> Stores``."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from ..errors import StoreURLError
from .bundle import Stores
from .inmemory import InMemoryStore
from .roles import (
    Backend,
    Commit,
    Coordination,
    SchemaAdmin,
    SessionStore,
    TaskStore,
)
from .sqlite import SQLiteStore

__all__ = [
    "Backend",
    "Commit",
    "Coordination",
    "InMemoryStore",
    "SQLiteStore",
    "SchemaAdmin",
    "SessionStore",
    "Stores",
    "TaskStore",
    "open_store",
]


def open_store(url: str, *, cache: str | None = None, migrate: bool = True) -> Stores:
    """Open the store roles by URL, optionally with a session cache in front of them.

    ``memory://``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (with
    ``?synchronous=normal`` to trade power-cut durability for speed); ``postgresql://...``.
    ``cache`` is a ``redis://`` URL: hot sessions and recent messages with a TTL.
    SQL stores apply pending schema migrations on open unless ``migrate`` is false.
    """
    backend = open_backend(url, migrate=migrate)
    if not cache:
        return Stores.of(backend)
    if urlsplit(cache).scheme not in ("redis", "rediss"):
        backend.close()
        raise StoreURLError(f"unknown cache URL {cache!r}: expected redis://host:port/db")
    from .redis import RedisSessionCache

    try:
        return Stores.of(backend, sessions=RedisSessionCache(backend, cache))
    except BaseException:
        backend.close()
        raise


def open_backend(url: str, *, migrate: bool = True) -> Backend:
    """The one database a URL names, playing every role it can."""
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return InMemoryStore(url)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc or not path:
            raise StoreURLError(
                f"bad SQLite store URL {url!r}: use sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db"
            )
        options = parse_qs(parts.query)
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise StoreURLError(f"unknown SQLite store option(s): {', '.join(sorted(unknown))}")
        synchronous = options.get("synchronous", ["full"])[-1]
        try:
            return SQLiteStore(path, synchronous=synchronous, migrate=migrate)
        except ValueError as exc:
            raise StoreURLError(str(exc)) from None
    if parts.scheme in ("postgresql", "postgres"):
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise StoreURLError(
                f"PostgreSQL stores need {exc.name}: pip install 'relaystate[postgres]'"
            ) from None
        return PostgresStore(url, migrate=migrate)
    raise StoreURLError(
        f"unknown store URL {url!r}: expected memory://, sqlite:///path.db or postgresql://..."
    )
