"""Store backends behind one interface, opened by URL."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from ..errors import StoreURLError
from .base import Commit, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["Commit", "MemoryStore", "SQLiteStore", "Store", "open_store"]


def open_store(url: str) -> Store:
    """Open ``memory://`` or ``sqlite:///relative.db`` / ``sqlite:////absolute.db``.

    SQLite accepts ``?synchronous=normal`` to trade power-cut durability for speed.
    """
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return MemoryStore(url)
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
            return SQLiteStore(path, synchronous=synchronous)
        except ValueError as exc:
            raise StoreURLError(str(exc)) from None
    raise StoreURLError(f"unknown store URL {url!r}: expected memory:// or sqlite:///path.db")
