"""The session role: sessions owned by one user, messages numbered per session and paged."""

from __future__ import annotations

import pytest

from ..errors import NotFound, SessionConflict
from ..store import SessionStore, Stores
from .fixtures import Conformance
from .records import ADMIN, ALICE, MALLORY, T0, said, session


class SessionRoleTests(Conformance):
    """What every session store must keep: sessions scoped by user and version-checked,
    messages numbered in order."""

    @pytest.fixture
    def sessions(self, bundle: Stores) -> SessionStore:
        return bundle.sessions

    def test_sessions_are_scoped_and_owned(self, sessions: SessionStore) -> None:
        mine = session(language="zh")
        sessions.write(mine)
        assert sessions.get_session("s1", ALICE) == mine
        assert sessions.get_session("s1", ADMIN) == mine
        assert sessions.get_session("s1", MALLORY) is None
        assert sessions.get_session("nope", ALICE) is None
        with pytest.raises(NotFound):
            sessions.write(session(user="mallory"), said("mine now", user="mallory"))
        stored = sessions.get_session("s1", ALICE)
        assert stored is not None and stored.language == "zh"
        assert sessions.messages("s1", ALICE) == []  # the refused write wrote nothing at all

    def test_a_session_is_replaced_whole(self, sessions: SessionStore) -> None:
        sessions.write(session(active_task_ids=["t1"], context={"choices": ["t1"]}))
        sessions.write(session(active_task_ids=["t1", "t2"], language="zh", version=1))
        stored = sessions.get_session("s1", ALICE)
        assert stored is not None
        assert (stored.active_task_ids, stored.context, stored.language) == (["t1", "t2"], {}, "zh")

    def test_messages_are_numbered_per_session_in_order(self, sessions: SessionStore) -> None:
        sessions.write(session("s1"))
        sessions.write(session("s2"))
        first = said("a", "b")
        sessions.write(None, first)
        other = said("x", sid="s2")
        sessions.write(None, other)
        second = said("c")
        sessions.write(session("s1", language="zh", version=1), second)
        assert [m.id for m in first + second] == [
            1,
            2,
            3,
        ]  # the store numbered the written messages
        assert [m.id for m in other] == [1]
        got = sessions.messages("s1", ALICE)
        assert [(m.id, m.text) for m in got] == [(1, "a"), (2, "b"), (3, "c")]
        assert [m.to_dict() for m in got] == [m.to_dict() for m in first + second]
        assert [m.text for m in sessions.messages("s2", ALICE)] == ["x"]

    def test_messages_are_scoped_limited_and_paged_backwards(self, sessions: SessionStore) -> None:
        sessions.write(session())
        sessions.write(None, said(*[str(i) for i in range(7)]))
        assert [m.text for m in sessions.messages("s1", ALICE, limit=3)] == ["4", "5", "6"]
        page = sessions.messages("s1", ALICE, limit=3, before=5)
        assert [(m.id, m.text) for m in page] == [(2, "1"), (3, "2"), (4, "3")]
        assert [m.text for m in sessions.messages("s1", ALICE, limit=3, before=2)] == ["0"]
        assert sessions.messages("s1", ALICE, limit=0) == []
        assert sessions.messages("s1", MALLORY) == []
        assert len(sessions.messages("s1", ADMIN, limit=100)) == 7
        assert sessions.messages("nope", ALICE) == []

    def test_an_expired_session_is_still_readable(self, sessions: SessionStore) -> None:
        old = session(ttl_seconds=60, expires_at=T0)
        sessions.write(old, said("hi"))
        assert sessions.get_session("s1", ALICE) == old  # expiry is the runtime's decision
        assert [m.text for m in sessions.messages("s1", ALICE)] == ["hi"]

    def test_a_session_written_since_it_was_read_is_not_overwritten(
        self, sessions: SessionStore
    ) -> None:
        """Optimistic locking: two turns of one session never overwrite each other's task list."""
        sessions.write(session(active_task_ids=["t1"]))
        read_by_a = sessions.get_session("s1", ALICE)
        read_by_b = sessions.get_session("s1", ALICE)
        assert read_by_a is not None and read_by_b is not None and read_by_a.version == 1
        read_by_a.active_task_ids.append("t2")
        sessions.write(read_by_a, said("a"))
        assert read_by_a.version == 2
        read_by_b.active_task_ids.append("t3")
        with pytest.raises(SessionConflict):
            sessions.write(read_by_b, said("b"))
        with pytest.raises(SessionConflict):
            sessions.write(session(), said("a new copy of an existing id"))
        stored = sessions.get_session("s1", ALICE)
        assert stored is not None and stored.active_task_ids == ["t1", "t2"] and stored.version == 2
        assert [m.text for m in sessions.messages("s1", ALICE)] == ["a"]  # the loser wrote nothing
