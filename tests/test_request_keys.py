"""A turn sent with a request key (HTTP Idempotency-Key) is done once: a retry is answered
from the turn the key committed, on every backend, also when both run at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import InvalidInput, Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.errors import RequestKeyReused

ALICE = Scope.user("alice")
BOB = Scope.user("bob")
BOOK = "book a flight from Beijing to Shanghai on Dec 9, economy, for Alice Wang"


@pytest.fixture
def talk(any_store_url: str, tmp_path: Path) -> Iterator[Conversation]:
    rt = Runtime(open_store(any_store_url), templates(tmp_path / "ledger.db"))
    yield Conversation(rt)
    rt.close()


def said(talk: Conversation, scope: Scope, session: str) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in talk.runtime.messages(scope, session, limit=100)]


def test_a_retried_turn_is_answered_not_done_again(talk: Conversation) -> None:
    first = talk.handle(ALICE, BOOK, "s1", request_key="k-1")
    assert not first.replayed and first.state is not None
    again = talk.handle(ALICE, BOOK, "s1", request_key="k-1")
    assert again.replayed and again.reply == first.reply and again.session_id == "s1"
    assert again.state is not None and again.state.task.id == first.state.task.id
    assert again.state.task.version == first.state.task.version  # nothing was written
    assert said(talk, ALICE, "s1") == [("user", BOOK), ("assistant", first.reply)]
    assert len(talk.runtime.tasks(ALICE, limit=10)) == 1
    # without a key (or with a new one) the same words are a new turn
    talk.handle(ALICE, BOOK, "s1", request_key="k-2")
    assert [r for r, _ in said(talk, ALICE, "s1")] == ["user", "assistant"] * 2


def test_a_key_names_one_request(talk: Conversation) -> None:
    talk.handle(ALICE, BOOK, "s1", request_key="k-1")
    with pytest.raises(RequestKeyReused, match="other words"):
        talk.handle(ALICE, "cancel", "s1", request_key="k-1")
    with pytest.raises(RequestKeyReused, match="session s1"):
        talk.handle(ALICE, BOOK, "s2", request_key="k-1")
    # a key is the user's own: another user's same key is another request
    bobs = talk.handle(BOB, BOOK, "s9", request_key="k-1")
    assert not bobs.replayed and said(talk, BOB, "s9")[0] == ("user", BOOK)
    for bad in ("", "has space", "x" * 256, "naïve"):
        with pytest.raises(InvalidInput, match="request_key"):
            talk.handle(ALICE, BOOK, "s1", request_key=bad)
    assert len(said(talk, ALICE, "s1")) == 2  # refused requests wrote nothing


def test_a_new_session_turn_retried_without_its_session_id(talk: Conversation) -> None:
    first = talk.handle(ALICE, BOOK, None, request_key="k-new")
    again = talk.handle(ALICE, BOOK, None, request_key="k-new")
    assert again.replayed and again.session_id == first.session_id
    assert len(talk.runtime.tasks(ALICE, limit=10)) == 1


@pytest.mark.parametrize("session", ["s1", None])
def test_two_requests_with_one_key_at_once_commit_one_turn(
    talk: Conversation, session: str | None
) -> None:
    results: list[object] = []
    start = threading.Barrier(4)

    def send() -> None:
        start.wait()
        try:
            results.append(talk.handle(ALICE, BOOK, session, request_key="k-race"))
        except Exception as exc:  # collected: the assertion below names it
            results.append(exc)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    turns = [r for r in results if not isinstance(r, Exception)]
    assert len(turns) == 4, results
    assert sum(not t.replayed for t in turns) == 1  # type: ignore[attr-defined]
    assert len({t.session_id for t in turns}) == 1  # type: ignore[attr-defined]
    assert len(talk.runtime.tasks(ALICE, limit=10)) == 1
    words = said(talk, ALICE, turns[0].session_id)  # type: ignore[attr-defined]
    assert [r for r, _ in words] == ["user", "assistant"]
