"""``relaystate.client`` against a real ``relaystate serve`` process: every endpoint, sync and
async, its answers read into the API's typed records, its error answers raised as the
library's own errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relaystate import Conflict, InvalidInput, NotFound, ScopeError, TaskLocked
from relaystate.client import AsyncClient, Client, RateLimited, Unauthorized
from relaystate.server import schemas

from ..services import free_port

BOOK = "book a flight from Beijing to Shanghai on Dec 9, economy, for Alice Wang"


class Served:
    """A ``relaystate serve`` on a free port over a SQLite file, with keys for alice, bob and
    an operator."""

    def __init__(self, where: Path, rate: float = 1000) -> None:
        self.store = f"sqlite:///{where}/served.db"
        env = {**os.environ, "RELAYSTATE_NOW": "2026-11-29T10:00:00"}
        self.keys = {
            who: json.loads(
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "relaystate.cli",
                        "users",
                        "create",
                        who,
                        "--json",
                        "--store",
                        self.store,
                        *(["--admin"] if who == "ops" else []),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                    cwd=where,
                ).stdout
            )["api_key"]
            for who in ("alice", "bob", "ops")
        }
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "relaystate.cli",
                "serve",
                "--port",
                str(self.port),
                "--store",
                self.store,
                "--no-demo-key",
                "--rate",
                str(rate),
            ],
            env=env,
            cwd=where,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("serve did not start")

    def client(self, who: str) -> Client:
        return Client(self.url, self.keys[who], tries=2, backoff=0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    found = Served(tmp_path_factory.mktemp("served"))
    yield found
    found.stop()


def test_a_conversation_and_its_task_through_every_task_endpoint(served: Served) -> None:
    with served.client("alice") as alice, served.client("ops") as ops:
        me = alice.me()
        assert (me.user_id, me.admin) == ("alice", False)
        agents = alice.agents()
        assert {a.type for a in agents.agents} >= {"flight_booking", "refund"}
        assert agents.statuses["zh"]["done"] == "已完成"
        session = alice.new_session("en")
        assert isinstance(session, schemas.Session) and session.user_id == "alice"
        turn = alice.say(session.id, BOOK)
        assert isinstance(turn, schemas.Turn) and turn.task is not None
        assert turn.task.type == "flight_booking" and turn.task.status == "waiting_user"
        task_id = turn.task.id
        again = alice.say(session.id, BOOK, key="k-alice-1")
        assert alice.say(session.id, BOOK, key="k-alice-1").reply == again.reply  # replayed
        assert alice.session(session.id).active_task_ids == [task_id]
        page = alice.messages(session.id, limit=2)
        assert [m.role for m in page.messages] == ["user", "assistant"] and page.next_before
        assert [t.id for t in alice.tasks()] == [task_id]
        task = alice.task(task_id)
        assert isinstance(task, schemas.TaskWithActions) and task.stage == "confirming"
        done = alice.confirm(task_id, version=task.version)
        assert done.status == "done" and [a.status for a in done.actions] == ["success"] * 2
        assert [a.name for a in alice.actions(task_id)] == ["search_flights", "create_order"]
        history = alice.history(task_id)
        assert history.baseline is None and history.entries[-1].said
        assert any("confirmed by the user" in e.said for e in history.entries)
        told = alice.history(task_id, "zh").entries[0].said[0]
        assert "出发地" in told, told  # the slot's label in the template, in Chinese
        assert alice.state_at(task_id, 1).stage == "confirming"  # every slot in one message
        assert alice.resume(task_id).status == "done"
        with pytest.raises(TaskLocked) as locked:
            alice.cancel(task_id)
        assert locked.value.status == 409 and isinstance(locked.value, Conflict)  # type: ignore[attr-defined]
        refund = alice.say(session.id, "I want a refund for ORD-10001").task
        assert refund is not None
        filled = alice.fill(refund.id, {"reason": "it arrived broken"})
        assert filled.slots["reason"] == "it arrived broken"
        assert alice.cancel(refund.id).status == "cancelled"
        assert [b.build for b in ops.builds()] and ops.workers(stopped=True)
        seen = next(iter(alice.events(task_id)))
        assert seen.id == task_id and seen.status == "done"
        assert alice.events_token(task_id).token.startswith("evt.")


def test_errors_are_the_librarys_own(served: Served) -> None:
    with served.client("alice") as alice, served.client("bob") as bob:
        turn = alice.say("s-errors", BOOK)
        assert turn.task is not None
        with pytest.raises(NotFound) as missing:
            bob.task(turn.task.id)  # another user's id answers as none
        assert missing.value.code == "not_found"  # type: ignore[attr-defined]
        with pytest.raises(InvalidInput):
            alice.say("s-errors", "\x00")
        done = alice.confirm(turn.task.id)
        with pytest.raises(ScopeError):
            alice.rerun(done.actions[0].id)  # an operator's work, with a user's key
        with pytest.raises(Unauthorized), Client(served.url, "rsk_not_a_key") as stranger:
            stranger.me()
        with pytest.raises(NotFound):
            list(alice.events("no-such-task"))
    with served.client("ops") as ops:
        with pytest.raises(Conflict):  # the Action succeeded: nothing for a person to settle
            ops.resolve(done.actions[0].id, "success")
        unpinned = ops.unpin(done.id, "moving it on")  # not pinned: nothing to lift
        assert (unpinned.id, unpinned.version, unpinned.pinned) == (done.id, done.version, False)


def test_memory_endpoints(served: Served) -> None:
    with served.client("alice") as alice:
        added = alice.add_memory("notes", [{"id": "n1", "text": "I moved to Lisbon in May"}])
        assert (added.added, added.total) == (1, 1)
        assert alice.memory_item("notes", "n1").text == "I moved to Lisbon in May"
        hits = alice.search("notes", "when did I move to Lisbon?", mode="keyword")
        assert [h.id for h in hits] == ["n1"] and hits[0].score > 0
        turn = alice.say("s-memory", BOOK)
        assert turn.task is not None
        context = alice.context(turn.task.id, budget=500)
        assert context.tokens <= 500 and context.explanation
        assert alice.ready() is True


def test_the_async_client_has_every_method_of_the_sync_one() -> None:
    import inspect

    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            n: inspect.signature(f)
            for n, f in vars(cls).items()
            if callable(f) and not n.startswith("_") and n not in ("close", "run")
        }

    sync, aio = public(Client), public(AsyncClient)
    assert sorted(sync) == sorted(aio)
    for name, sig in sync.items():
        assert list(sig.parameters) == list(aio[name].parameters), name


def test_the_async_client_does_the_same(served: Served) -> None:
    async def go() -> None:
        async with (
            AsyncClient(served.url, served.keys["alice"]) as alice,
            AsyncClient(served.url, served.keys["ops"]) as ops,
        ):
            assert (await alice.me()).user_id == "alice"
            assert "refund" in {a.type for a in (await alice.agents()).agents}
            session = await alice.new_session("zh")
            assert (await alice.session(session.id)).language == "zh"
            turn = await alice.say(session.id, BOOK)
            assert turn.task is not None
            assert [m.role for m in (await alice.messages(session.id)).messages] == [
                "user",
                "assistant",
            ]
            task = await alice.task(turn.task.id)
            assert task.id in [t.id for t in await alice.tasks()]
            done = await alice.confirm(task.id, version=task.version)
            assert done.status == "done"
            assert len(await alice.actions(task.id)) == 2
            assert (await alice.history(task.id, "zh")).entries[-1].said
            assert (await alice.state_at(task.id, 1)).stage == "confirming"
            assert (await alice.resume(task.id)).status == "done"
            with pytest.raises(TaskLocked):
                await alice.cancel(task.id)
            refund = (await alice.say(session.id, "I want a refund for ORD-10001")).task
            assert refund is not None
            assert (await alice.fill(refund.id, {"reason": "broken"})).slots["reason"] == "broken"
            assert (await alice.events_token(task.id)).token.startswith("evt.")
            async for seen in alice.events(task.id):
                assert seen.status == "done"
                break
            with pytest.raises(NotFound):
                await alice.task("no-such-task")
            with pytest.raises(ScopeError):
                await alice.rerun(done.actions[0].id)
            with pytest.raises(Conflict):
                await ops.resolve(done.actions[0].id, "success")
            assert (await ops.unpin(task.id, "moving it on")).version == done.version
            assert [b.build for b in await ops.builds()] and await ops.workers()
            added = await alice.add_memory("async-notes", [{"id": "a1", "text": "Lisbon in May"}])
            assert added.total == 1
            assert (await alice.memory_item("async-notes", "a1")).text == "Lisbon in May"
            assert [h.id for h in await alice.search("async-notes", "Lisbon", mode="keyword")]
            assert (await alice.context(task.id, budget=300)).tokens <= 300
            assert await alice.ready() is True

    asyncio.run(go())


def test_a_lost_answer_is_sent_again_with_its_key_and_done_once(served: Served) -> None:
    """The first answer is lost on its way back (a transport that drops it after the server
    committed the turn): the client sends the turn again with the same key."""
    sent: list[str] = []
    real = httpx.HTTPTransport()

    class Lossy(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = real.handle_request(request)
            sent.append(request.headers.get("Idempotency-Key", ""))
            if len(sent) == 1:
                response.read()
                raise httpx.ReadTimeout("the answer was lost", request=request)
            return response

    with Client(served.url, served.keys["alice"], transport=Lossy(), backoff=0.01) as alice:
        turn = alice.say("s-lossy", BOOK)
    assert len(sent) == 2 and sent[0] == sent[1] != ""
    with served.client("alice") as alice:
        listed = [m.text for m in alice.messages("s-lossy").messages]
    assert listed.count(BOOK) == 1 and turn.task is not None


def test_every_endpoint_has_a_client_method(served: Served) -> None:
    """Each operation of /openapi.json is one call the client makes (built here with the
    path's own placeholders for ids)."""
    from urllib.parse import unquote

    from relaystate.client import calls

    spec = httpx.get(f"{served.url}/openapi.json").json()
    operations = {
        f"{m.upper()} {p}" for p, ms in spec["paths"].items() for m in ms if p.startswith("/v1")
    }
    t, a, s, ns = "{task_id}", "{action_id}", "{session_id}", "{namespace}"
    made = [
        calls.me(),
        calls.agents(),
        calls.new_session(),
        calls.session(s),
        calls.messages(s),
        calls.say(s, "x", key="k"),
        calls.tasks(),
        calls.task(t),
        calls.actions(t),
        calls.history(t),
        calls.state_at(t, 1),
        calls.resume(t),
        calls.cancel(t),
        calls.confirm(t),
        calls.fill(t, {}),
        calls.unpin(t, "r"),
        calls.resolve(a, "success"),
        calls.rerun(a),
        calls.events_token(t),
        calls.events(t),
        calls.add_memory(ns, []),
        calls.memory_item(ns, "{item_id}"),
        calls.search(ns, "q"),
        calls.context(t),
        calls.builds(),
        calls.workers(),
    ]
    covered = {f"{c.method} {unquote(c.path)}" for c in made}
    assert sorted(operations - covered) == []
    assert sorted(covered - operations) == []  # and no call to an endpoint that is not there


def test_too_many_requests_raise_rate_limited_with_the_wait(tmp_path: Path) -> None:
    slow = Served(tmp_path, rate=1)
    try:
        with (
            Client(slow.url, slow.keys["alice"], tries=1) as alice,
            pytest.raises(RateLimited) as limited,
        ):
            for _ in range(20):
                alice.me()
        assert limited.value.status == 429 and limited.value.retry_after  # type: ignore[attr-defined]
    finally:
        slow.stop()
