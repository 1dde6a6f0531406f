"""An API host loses its database between a commit and its answer (issue 22): the outcome is
unknown to the runtime, so it reads back what committed instead of writing again.

A proxy between the runtime and a real PostgreSQL drops the connection right after the
turn's commit statement reached the server (committed, answer lost), or right before
(nothing written), or keeps the database away for longer than the runtime waits (unknown:
the client's retry with the same request key is answered from what committed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation, Turn
from relaystate.demo import templates
from relaystate.errors import StoreUnavailable
from relaystate.store.postgres import store as pg_store

from .proxy import Proxy

COMMIT = b"INSERT INTO journal"  # only a task's commit statement says this
ALICE = Scope.user("alice")


@pytest.fixture
def proxied(postgres_url: str) -> Iterator[tuple[Proxy, str]]:
    where = postgres_url.split("@", 1)[1].split("/", 1)[0]
    host, _, port = where.rpartition(":")
    proxy = Proxy(host, int(port))
    try:
        yield proxy, postgres_url.replace(where, f"127.0.0.1:{proxy.port}")
    finally:
        proxy.close()


def _retried(call: Callable[[], Turn]) -> Turn:
    """As a client does: again while the store is away (it fails fast), for a few seconds."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _counts(url: str) -> tuple[int, int, int]:
    """Tasks, journal entries and messages as the database has them (read directly)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM journal),"
            " (SELECT count(*) FROM messages)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_a_lost_answer_after_the_commit_is_read_back_not_written_again(
    proxied: tuple[Proxy, str], postgres_url: str, tmp_path: Path
) -> None:
    proxy, url = proxied
    rt = Runtime(open_store(url), templates(tmp_path / "ledger.db"))
    conv = Conversation(rt)
    try:
        proxy.cut_answer(COMMIT)
        turn = conv.handle(ALICE, "I want a refund for order ORD-1234", "s1")
        assert proxy.cuts == 1
        assert turn.state is not None
        tasks, entries, messages = _counts(postgres_url)
        assert tasks == 1
        # exactly what one turn writes, once: the turn answered from what committed
        assert [m.id for m in rt.messages(ALICE, "s1")] == list(range(1, messages + 1))
        assert entries == turn.state.task.version  # one journal entry per version, no gap
        session = rt.session(ALICE, "s1")
        assert turn.state.task.id in session.active_task_ids
        # the session's version went up once: the next turn is not refused as stale
        later = conv.handle(ALICE, "ORD-1234", "s1")
        assert later.state is not None and later.state.task.id == turn.state.task.id
    finally:
        rt.close()


def test_a_request_lost_before_the_server_writes_nothing_and_says_so(
    proxied: tuple[Proxy, str], postgres_url: str, tmp_path: Path
) -> None:
    proxy, url = proxied
    rt = Runtime(open_store(url), templates(tmp_path / "ledger.db"))
    conv = Conversation(rt)
    try:
        proxy.cut_request(COMMIT)
        with pytest.raises(StoreUnavailable, match="did not commit"):
            conv.handle(ALICE, "I want a refund for order ORD-1234", "s1")
        assert _counts(postgres_url) == (0, 0, 0)
        turn = conv.handle(ALICE, "I want a refund for order ORD-1234", "s1")
        assert turn.state is not None and _counts(postgres_url)[0] == 1
    finally:
        rt.close()


def test_an_unknown_outcome_is_answered_from_what_committed_on_the_retry(
    proxied: tuple[Proxy, str],
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy, url = proxied
    monkeypatch.setattr(pg_store, "SETTLE_WITHIN", 1.0)
    rt = Runtime(open_store(url), templates(tmp_path / "ledger.db"))
    conv = Conversation(rt)
    try:
        proxy.cut_answer(COMMIT, then_partition=True)  # committed, then the database away
        with pytest.raises(StoreUnavailable, match="unknown"):
            conv.handle(ALICE, "I want a refund for order ORD-1234", None, request_key="k-1")
        assert _counts(postgres_url)[0] == 1  # it did commit
        proxy.heal()
        retried = _retried(
            lambda: conv.handle(
                ALICE, "I want a refund for order ORD-1234", None, request_key="k-1"
            )
        )
        assert retried.state is not None and retried.replayed
        assert _counts(postgres_url)[0] == 1  # answered, not started a second time
    finally:
        rt.close()
