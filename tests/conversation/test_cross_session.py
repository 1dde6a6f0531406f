"""A new request in another session is never answered with another Task's result.

Session A starts a complete booking whose Action is running (held on an Event inside the
executor, or by a failpoint in a real server) when its answer is lost; session B of the
same user sends the same complete request. B gets its own Task (told another one like it
is under way), never A's progress, reference or id; A's Task is left as it was. What asks
for A (its id, "continue") still brings it back, a request key's retry in A's session is
still answered from A's turn, and a Task still gathering its details is still joined.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from relaystate import (
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
    user_confirmed,
)
from relaystate.conversation import Conversation, Turn
from relaystate.conversation.elsewhere import takes_requests
from relaystate.demo import Ledger, after_sales, flight_booking, refund
from relaystate.errors import RequestKeyReused
from relaystate.model import Task, TaskState, TaskStatus
from relaystate.task.next_step import AskSlot
from relaystate.task.spec import ActionContext

from ..server.serving import Server

NOW = "2026-12-03T09:00:00"  # a Thursday
ALICE = Scope.user("alice")


class Gate:
    """Holds the first side effect until released: session A's Action, running."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self._first = itertools.count()

    def hold(self) -> None:
        if next(self._first) == 0:
            self.inside.set()
            assert self.release.wait(20), "the held Action was never released"


class HeldLedger(Ledger):
    """The demo downstream, whose first order waits at the gate."""

    def __init__(self, path: Path, gate: Gate) -> None:
        super().__init__(path)
        self.gate = gate

    def apply(
        self, key: str, kind: str, payload: dict[str, Any], *, deduplicate: bool = True
    ) -> dict[str, Any]:
        if kind == "order":
            self.gate.hold()
        return super().apply(key, kind, payload, deduplicate=deduplicate)


def stay(gate: Gate, *, confirm: bool) -> TaskTemplate:
    """A user's own template: a room, reserved downstream (a side effect) as soon as its
    details are complete, or once they are confirmed."""
    confirming = [Stage("confirming", exit=user_confirmed)] if confirm else []
    template = TaskTemplate(
        "room_stay",
        titles={"en": "room stay", "zh": "住宿预订"},
        triggers={"en": ["hotel", "a room"], "zh": ["酒店", "订房"]},
        slots=[
            Slot("city", kind="place", labels={"zh": "城市"}),
            Slot("check_in", kind="date", labels={"zh": "入住日期"}),
            Slot("nights", kind="count", maximum=30, labels={"zh": "晚数"}),
            Slot("guest_name", kind="person", labels={"zh": "入住人"}),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            *confirming,
            Stage("reserving", actions=["reserve"]),
            Stage("done"),
        ],
    )
    made = itertools.count(1)

    @template.action(name="reserve", side_effect=True, idempotent=True)
    def reserve(ctx: ActionContext) -> dict[str, Any]:
        gate.hold()
        return {"id": f"RES-{next(made):05d}", **dict(ctx.slots)}

    return template


@dataclass
class World:
    """A runtime, its held gate, and the complete request (with the words that run it)."""

    conv: Conversation
    gate: Gate
    request: str
    short: str
    """The request one detail short (a Task that still asks)."""
    then: list[str] = field(default_factory=list)
    """What A says after the request to make its Action run (a confirmation)."""

    @property
    def rt(self) -> Runtime:
        return self.conv.runtime


ROOM = "book a hotel in London from December 10 for 3 nights", ", for Ann Lee"
ROOM_ZH = "订酒店，伦敦，12月10号入住，住三晚", "，入住人张伟"
FLIGHT = "book a flight from Paris to Rome tomorrow, economy", ", for Ann Lee"
Made = tuple[list[TaskTemplate], tuple[str, str], list[str]]
WORLDS: dict[str, Callable[[Path, Gate], Made]] = {
    "own template, runs at once (en)": lambda p, g: ([stay(g, confirm=False)], ROOM, []),
    "own template, runs at once (zh)": lambda p, g: ([stay(g, confirm=False)], ROOM_ZH, []),
    "own template, confirmed": lambda p, g: ([stay(g, confirm=True)], ROOM, ["yes"]),
    "demo flight": lambda p, g: (
        [flight_booking(led := HeldLedger(p / "ledger.db", g)), refund(led), after_sales(led)],
        FLIGHT,
        ["yes"],
    ),
}


@pytest.fixture(params=sorted(WORLDS))
def world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    monkeypatch.setenv("RELAYSTATE_NOW", NOW)
    gate = Gate()
    templates, (short, rest), then = WORLDS[request.param](tmp_path, gate)
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/cross.db"), templates)
    yield World(Conversation(rt), gate, short + rest, short, then)
    gate.release.set()
    rt.close()


@dataclass
class Running:
    """Session A's last turn, running its Action in a thread (its client gave up)."""

    task_id: str
    thread: threading.Thread
    turns: list[Turn]

    def finish(self, world: World) -> Turn:
        world.gate.release.set()
        self.thread.join(20)
        assert not self.thread.is_alive() and self.turns, "A's turn did not finish"
        return self.turns[0]


def start_in_a(world: World, *, key: str | None = None) -> Running:
    """A's complete request (and its confirmation), the Action held while it runs."""
    texts = [world.request, *world.then]
    first = world.conv.handle(ALICE, texts[0], "a") if len(texts) > 1 else None
    done: list[Turn] = []
    last = texts[-1]
    thread = threading.Thread(
        target=lambda: done.append(world.conv.handle(ALICE, last, "a", request_key=key))
    )
    thread.start()
    assert world.gate.inside.wait(20), "A's Action never started"
    (task,) = world.rt.open_tasks(ALICE)
    assert first is None or (first.state is not None and first.state.task.id == task.id)
    assert task.status == TaskStatus.RUNNING
    return Running(task.id, thread, done)


def reference(state: TaskState | None) -> str:
    assert state is not None
    (ref,) = [
        a.output["id"] for a in state.actions if isinstance(a.output, dict) and "id" in a.output
    ]
    return str(ref)


def test_the_same_request_in_another_session_gets_its_own_task(world: World) -> None:
    a = start_in_a(world)
    before = world.rt.task(ALICE, a.task_id).task.to_dict()

    b = world.conv.handle(ALICE, world.request, "b")
    assert b.state is not None and b.state.task.id != a.task_id, b.why
    assert b.state.task.origin_session_id == "b"
    shown = json.dumps(b.to_dict(), ensure_ascii=False)
    assert a.task_id not in shown and a.task_id[:8] not in shown
    assert "in progress" not in b.reply and "办理中：" not in b.reply
    assert "like this under way" in b.reply or "类似的" in b.reply  # told, not merged
    assert world.rt.task(ALICE, a.task_id).task.to_dict() == before  # A untouched
    assert a.task_id not in world.rt.session(ALICE, "b").active_task_ids
    assert all(m.task_id != a.task_id for m in world.rt.messages(ALICE, "b"))

    a_done = a.finish(world)
    mine = reference(a_done.state)
    assert mine in a_done.reply
    assert mine not in b.reply
    for text in world.then:  # B goes on with its own booking: its own result
        b = world.conv.handle(ALICE, text, "b")
    assert b.state is not None and b.state.task.status == TaskStatus.DONE, b.reply
    theirs = reference(world.rt.task(ALICE, b.state.task.id))
    assert theirs != mine and theirs in b.reply and mine not in b.reply
    assert reference(world.rt.task(ALICE, a.task_id)) == mine
    assert {t.status for t in world.rt.tasks(ALICE)} == {TaskStatus.DONE}
    assert len(world.rt.tasks(ALICE)) == 2


def test_another_session_asking_for_the_running_task_gets_it(world: World) -> None:
    a = start_in_a(world)
    kept = world.conv.handle(ALICE, "continue", "c")
    assert kept.state is not None and kept.state.task.id == a.task_id, kept.why
    named = world.conv.handle(ALICE, world.request, "d", task_id=a.task_id)
    assert named.state is not None and named.state.task.id == a.task_id
    assert len(world.rt.tasks(ALICE)) == 1  # asking for it starts nothing
    a.finish(world)


def test_a_retry_with_the_request_key_in_its_session_is_answered_from_a(world: World) -> None:
    a = start_in_a(world, key="turn-a-1")
    last = [world.request, *world.then][-1]
    early = world.conv.handle(ALICE, last, "a", request_key="turn-a-1")  # still running
    assert early.replayed and early.state is not None and early.state.task.id == a.task_id
    a_done = a.finish(world)
    retry = world.conv.handle(ALICE, last, "a", request_key="turn-a-1")
    assert retry.replayed and retry.reply == a_done.reply
    assert retry.state is not None and retry.state.task.id == a.task_id
    with pytest.raises(RequestKeyReused):  # the key names A's request, not one in B
        world.conv.handle(ALICE, last, "b", request_key="turn-a-1")
    assert len(world.rt.tasks(ALICE)) == 1


def test_a_task_still_gathering_its_details_is_joined_not_duplicated(world: World) -> None:
    world.gate.release.set()  # nothing is held here
    asked = world.conv.handle(ALICE, world.short, "a")
    assert asked.state is not None and asked.state.task.status == TaskStatus.WAITING_USER
    again = world.conv.handle(ALICE, world.request, "b")
    assert again.state is not None and again.state.task.id == asked.state.task.id, again.why
    assert "like this under way" not in again.reply and "类似的" not in again.reply
    assert len(world.rt.tasks(ALICE)) == 1


def test_only_a_task_gathering_its_details_takes_a_new_request() -> None:
    template = stay(Gate(), confirm=False)
    state = TaskState(Task("t1", "room_stay", "alice", "collecting", TaskStatus.WAITING_USER))
    ask = AskSlot("guest_name")
    assert takes_requests(template, state, ask)
    state.task.stage = "done"  # waits for the user again, after its reservation was sent
    assert not takes_requests(template, state, ask)
    state.task.stage, state.task.status = "collecting", TaskStatus.RUNNING
    assert not takes_requests(template, state, ask)


def test_through_the_server_a_lost_answer_then_the_same_request_in_a_new_session(
    tmp_path: Path,
) -> None:
    """The real server: A's "yes" times out while its order is recorded and held (a
    failpoint); B's same booking is its own; A's retry with its key gets A's order."""
    held = {"RELAYSTATE_FAILPOINTS": "after_record:create_order=sleep=4"}
    srv = Server(f"sqlite:///{tmp_path}/api.db", tmp_path, env=held)
    key = json.loads(srv.cli("users", "create", "alice", "--json"))["api_key"]
    book, in_a, in_b = "".join(FLIGHT), "/v1/sessions/s1/messages", "/v1/sessions/s2/messages"
    sent = {"Idempotency-Key": "turn-a-yes"}
    try:
        srv.start()
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}) as api:
            a_id = api.post(in_a, json={"text": book}).json()["turn"]["task"]["id"]
            with pytest.raises(httpx.TimeoutException):  # the answer is lost
                api.post(in_a, json={"text": "yes"}, headers=sent, timeout=1.5)
            assert api.get(f"/v1/tasks/{a_id}").json()["task"]["status"] == "running"

            b = api.post(in_b, json={"text": book}, timeout=20).json()["turn"]
            assert b["task"]["id"] != a_id and a_id[:8] not in json.dumps(b)
            assert "ORD-" not in b["reply"] and "in progress" not in b["reply"], b["reply"]
            assert "Please confirm" in b["reply"] and b["task"]["status"] == "waiting_user"

            deadline = time.monotonic() + 20
            while api.get(f"/v1/tasks/{a_id}").json()["task"]["status"] != "done":
                assert time.monotonic() < deadline, "A's booking never finished"
                time.sleep(0.2)
            retry = api.post(in_a, json={"text": "yes"}, headers=sent, timeout=20)
            assert retry.headers["idempotent-replayed"] == "true"
            turn = retry.json()["turn"]
            assert turn["task"]["id"] == a_id and "ORD-00001" in turn["reply"], turn["reply"]
            b_task = api.get(f"/v1/tasks/{b['task']['id']}").json()["task"]
            assert b_task["status"] == "waiting_user" and b_task["origin_session_id"] == "s2"
    finally:
        srv.stop()
