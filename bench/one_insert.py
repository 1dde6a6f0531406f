"""The physical limit of a served turn: a minimal ASGI app that does one durable insert
per request and nothing else (no routing, no validation, no framework), on the same store
kinds relaystate uses, with the same durability (SQLite WAL + ``synchronous=FULL``; a
PostgreSQL commit, ``synchronous_commit`` as the server has it).

Run by ``bench/http_limit.py`` under the same uvicorn settings as ``relaystate serve``:
``ONE_INSERT_STORE=sqlite:///PATH`` or ``postgresql://...``. The insert runs in a worker
thread, as FastAPI runs relaystate's synchronous route, so the event loop is shared alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_STORE = os.environ.get("ONE_INSERT_STORE", "sqlite:///one-insert.db")
_OK = json.dumps({"ok": True}).encode()


class SQLiteInsert:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS requests (n INTEGER PRIMARY KEY, body TEXT)")
        self.lock = threading.Lock()

    def insert(self, body: bytes) -> None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT INTO requests (body) VALUES (?)", (body.decode(),))
            self.db.execute("COMMIT")


class PostgresInsert:
    def __init__(self, url: str) -> None:
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(url, min_size=4, max_size=40, kwargs={"autocommit": True})
        with self.pool.connection() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS requests (n bigserial PRIMARY KEY, body text)")

    def insert(self, body: bytes) -> None:
        with self.pool.connection() as conn:
            conn.execute("INSERT INTO requests (body) VALUES (%s)", (body.decode(),))


store = SQLiteInsert(_STORE.removeprefix("sqlite:///")) if _STORE.startswith("sqlite") else None
writer: SQLiteInsert | PostgresInsert = store or PostgresInsert(_STORE)


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["method"] == "POST":
        await asyncio.to_thread(writer.insert, body)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(_OK))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _OK})
