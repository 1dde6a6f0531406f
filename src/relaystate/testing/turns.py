"""A turn's commit: task, actions, journal, session and messages land together or not at all,
and a turn reads its session with the open tasks it lists in one call."""

from __future__ import annotations

import pytest

from ..errors import NotFound, SessionConflict, VersionConflict
from ..model import TaskStatus
from ..store import Stores
from .fixtures import Conformance
from .records import ADMIN, ALICE, MALLORY, action, change, create, new_task, said, session


class TurnRoleTests(Conformance):
    """The bundle a turn commits through: the task, its session and its messages together, or
    none of them."""

    @pytest.fixture
    def turns(self, bundle: Stores) -> Stores:
        return bundle

    def test_a_task_commit_carries_its_session_and_messages(self, turns: Stores) -> None:
        talk = said("hi", "yo", task_id="t1")
        first = create(turns, new_task(), session=session(active_task_ids=["t1"]), messages=talk)
        assert [m.id for m in talk] == [1, 2]
        stored = turns.sessions.get_session("s1", ALICE)
        assert stored is not None and stored.active_task_ids == ["t1"]
        assert [m.text for m in turns.sessions.messages("s1", ALICE)] == ["hi", "yo"]
        later = said("again", task_id="t1")
        change(turns, first, lambda s: s.task.slots.update(x=1), messages=later)
        assert later[0].id == 3
        assert [m.text for m in turns.sessions.messages("s1", ALICE)] == ["hi", "yo", "again"]

    def test_a_failed_commit_writes_no_session_and_no_messages(self, turns: Stores) -> None:
        first = create(turns, new_task(), session=session(language="en"), messages=said("hi"))
        change(turns, first, lambda s: s.task.slots.update(x=1))
        with pytest.raises(VersionConflict):
            change(
                turns,
                first,
                lambda s: s.task.slots.update(x=2),
                session=session(language="zh"),
                messages=said("lost"),
            )
        stored = turns.sessions.get_session("s1", ALICE)
        assert stored is not None and stored.language == "en"
        assert [m.text for m in turns.sessions.messages("s1", ALICE)] == ["hi"]

    def test_a_stale_session_fails_the_whole_commit(self, turns: Stores) -> None:
        """A turn that lost its session to another turn writes no task, journal or message."""
        turns.write_session(session(active_task_ids=["t0"]), said("first"))
        stale = session(active_task_ids=["t0", "t1"])  # read before the write above: version 0
        with pytest.raises(SessionConflict):
            create(turns, new_task(), session=stale, messages=said("lost"))
        assert turns.tasks.load("t1", ADMIN) is None
        assert turns.tasks.journal("t1", ADMIN) == []
        stored = turns.sessions.get_session("s1", ALICE)
        assert stored is not None and stored.active_task_ids == ["t0"]
        assert [m.text for m in turns.sessions.messages("s1", ALICE)] == ["first"]
        fresh = turns.sessions.get_session("s1", ALICE)
        assert fresh is not None
        fresh.active_task_ids.append("t1")
        create(turns, new_task(), session=fresh, messages=said("redone"))  # read again: it lands
        assert turns.tasks.load("t1", ADMIN) is not None

    def test_another_users_session_id_fails_the_whole_commit(self, turns: Stores) -> None:
        turns.write_session(session(user="mallory"), said("mine", user="mallory"))
        with pytest.raises(NotFound):
            create(turns, new_task(), session=session(), messages=said("hi"))
        assert turns.tasks.load("t1", ADMIN) is None
        assert [m.text for m in turns.sessions.messages("s1", ADMIN)] == ["mine"]

    def test_read_turn_gives_the_session_and_its_open_tasks(self, turns: Stores) -> None:
        statuses = {"t1": TaskStatus.WAITING_USER, "t2": TaskStatus.DONE, "t3": TaskStatus.RUNNING}
        for tid, status in statuses.items():
            state = new_task(tid, status=status)
            state.actions.append(action(1, task_id=tid))
            create(turns, state)
        create(turns, new_task("bobs", user="bob"))
        listed = ["t3", "gone", "t2", "bobs", "t1"]
        turns.write_session(session(active_task_ids=listed), [])
        found, states = turns.read_turn("s1", ALICE)
        assert found is not None and found.active_task_ids == listed
        assert [s.task.id for s in states] == ["t3", "t1"]  # open, owned, in the session's order
        assert all([a.task_id for a in s.actions] == [s.task.id] for s in states)
        assert turns.read_turn("s1", MALLORY) == (None, [])
        assert turns.read_turn("nope", ALICE) == (None, [])
