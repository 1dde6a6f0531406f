"""Schemathesis against the app's own ``/openapi.json`` (issue 10): every operation, a bounded
and derandomized number of generated requests each (valid and invalid ones, plus the coverage
phase's boundary cases and the other methods on each path), with a real user's API key, over
a real SQLite store with the demo agents. No answer may be a 5xx, and every answer must be one
the schema documents: its status code, its content type, its JSON body (all of schemathesis'
default checks, none left out).

The store is seeded first (alice books a flight to the end, and starts a second one that waits
for her confirmation), and about half of the generated ids are swapped for those real ones, so
the requests reach the handlers behind the 404 too: turns with arbitrary text in live
sessions, confirmations, cancels, resumes, replays, the event stream (cut after its first
event). Schemathesis re-reads a swapped case, so a request that was invalid only by its id
counts as valid after the swap.

The schema is loaded from the same app over an empty memory store (the schema does not depend
on the data, and a module-level schema gives one test per operation; ``from_fixture`` does not
work with pytest 9); every request goes to the app over the seeded store (``app=``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from schemathesis import Case

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.memory.embed import HashEmbedder
from relaystate.server import create_app
from relaystate.server.api_keys import issue

NOW = "2026-11-29T10:00:00"
EXAMPLES = 50
"""Generated requests per operation in the fuzzing phase."""
USER = "alice"


def _spec_app() -> FastAPI:
    return create_app(Runtime(open_store("memory://"), []), recover_on_start=False)


schema = schemathesis.openapi.from_asgi("/openapi.json", _spec_app())
schema.config.max_stream_events = 1  # a live task's event stream ends after its first event
LIVE: dict[str, Any] = {}
"""Alice's key and real ids, set by the ``live_app`` fixture before its tests run."""


ALICE = "Bearer <alice's key>"
"""Her key's place: some cases are built at collection, before the store and the key exist;
``before_call`` puts the key in."""


@schema.auth(retry_on=[])
class AliceKey:
    """Her key on every request, except those schemathesis sends without one on purpose."""

    def get(self, case: Case, context: Any) -> str:
        return ALICE

    def set(self, case: Case, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": data}


@schemathesis.hook  # global (there is no per-schema before_call): acts only while LIVE is set
def before_call(context: Any, case: Case, kwargs: dict[str, Any]) -> None:
    """About half the generated path ids become one of alice's real ids (chosen by the
    generated value's checksum: as deterministic as the generation). Made here, schemathesis
    re-reads the case: a request invalid only by its id is valid after the swap."""
    if "ids" not in LIVE:  # outside this module's tests
        return
    if case.headers and case.headers.get("Authorization") == ALICE:
        case.headers["Authorization"] = f"Bearer {LIVE['key']}"
    query = case.query or {}
    if "key" in query and not isinstance(query["key"], str):
        # a query string holds text only: a "non-text" key arrives as valid text, so such a
        # case is no negative one; the header carries her key anyway
        del query["key"]
    real: dict[str, list[str]] = LIVE["ids"]
    for name, value in list((case.path_parameters or {}).items()):
        if name not in real or not isinstance(value, str):
            continue
        pick = zlib.crc32(value.encode("utf-8", "surrogatepass"))
        if pick % 2 == 0:
            case.path_parameters[name] = real[name][(pick // 2) % len(real[name])]


@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    """The app over a fresh SQLite store with the demo agents (and alice's key and real ids
    in LIVE), with a rate limit no fast run reaches."""
    work: Path = tmp_path_factory.mktemp("schemathesis")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RELAYSTATE_NOW", NOW)
        rt = Runtime(open_store(f"sqlite:///{work / 'api.db'}"), templates(work / "ledger.db"))
        try:
            _, key = issue(rt, Scope.admin("test"), USER, name=USER, admin=False, now=rt.clock())
            app = create_app(  # with the hash embedder, as `serve` has by default
                rt,
                rate=10_000,
                burst=10_000,
                recover_on_start=False,
                embedder=HashEmbedder(dimension=64),
            )
            LIVE.update(key=key, ids=_seed(rt))
            yield app
        finally:
            LIVE.clear()
            rt.close()


def _seed(rt: Runtime) -> dict[str, list[str]]:
    """Alice's two flight bookings, one done (its actions ran), one waiting for her yes."""
    conv = Conversation(rt)
    me = Scope.user(USER)
    turns = [
        conv.handle(me, text, session)
        for session, text in (
            ("s-done", "book a flight from Beijing to Shanghai"),
            ("s-done", "Dec 9, economy, for Alice Wang"),
            ("s-done", "yes"),
            ("s-wait", "book a flight from Shanghai to Beijing"),
            ("s-wait", "Dec 12, business, for Alice Wang"),
        )
    ]
    done, waiting = (turns[2].state, turns[4].state)  # in this order: the same run each time
    assert done is not None and done.task.status == "done", turns[2].reply
    assert waiting is not None and waiting.task.status == "waiting_user", turns[4].reply
    tasks = [done.task.id, waiting.task.id]
    actions = [a.id for t in tasks for a in sorted(rt.task(me, t).actions, key=lambda a: a.seq)]
    assert actions, "the finished booking ran its actions"
    return {"session_id": ["s-done", "s-wait"], "task_id": tasks, "action_id": actions}


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_the_api_answers_as_its_schema_says(case: Case, live_app: FastAPI) -> None:
    response = case.call_and_validate(app=live_app)
    assert response.status_code < 500, response.text
