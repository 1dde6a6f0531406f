"""The synchronous client of the HTTP API (httpx): one method per endpoint, each returning
the API's typed records and raising the library's own errors."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

import httpx

from ..server import schemas
from . import calls
from .calls import Call, T
from .transport import AGAIN, Events, answer, request, should_retry, wait


class Client:
    """``Client(base_url, api_key)``: every call as the key's user (an admin key reads every
    user's data). A turn is sent with an ``Idempotency-Key`` (a fresh UUID unless you give
    one) and sent again with it after a timeout, a lost connection or a 503: the server
    answers a resent turn from the one it committed, never twice. Reads are sent again
    likewise; other writes are not (their outcome is unknown: read the Task to see)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        tries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url, self._key, self.tries, self.backoff = base_url, api_key, tries, backoff
        self._http = httpx.Client(timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def run(self, call: Call[T]) -> T:
        """Send one call (with its retries) and read its answer."""
        for attempt in range(self.tries):
            response: httpx.Response | None = None
            try:
                response = self._http.request(**request(self.base_url, self._key, call))
            except AGAIN:
                if not should_retry(call, None, attempt, self.tries):
                    raise
            else:
                if not should_retry(call, response, attempt, self.tries):
                    return answer(response, call)
            time.sleep(wait(attempt, response, self.backoff))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the caller, agents, sessions and turns -----------------------------------------------
    def me(self) -> schemas.Me:
        return self.run(calls.me())

    def agents(self) -> schemas.Agents:
        return self.run(calls.agents())

    def new_session(self, language: str | None = None) -> schemas.Session:
        return self.run(calls.new_session(language))

    def session(self, session_id: str) -> schemas.Session:
        return self.run(calls.session(session_id))

    def messages(
        self, session_id: str, *, limit: int = 50, before: int | None = None
    ) -> schemas.Messages:
        return self.run(calls.messages(session_id, limit=limit, before=before))

    def say(
        self,
        session_id: str,
        text: str,
        *,
        language: str | None = None,
        task_id: str | None = None,
        key: str | None = None,
    ) -> schemas.Turn:
        """One turn; ``key`` the request's Idempotency-Key (default: a new UUID)."""
        key = key or str(uuid.uuid4())
        return self.run(calls.say(session_id, text, key=key, language=language, task_id=task_id))

    # -- tasks and their actions ---------------------------------------------------------------
    def tasks(self, status: str = "open", *, limit: int = 100) -> list[schemas.Task]:
        return self.run(calls.tasks(status, limit=limit))

    def task(self, task_id: str) -> schemas.TaskWithActions:
        return self.run(calls.task(task_id))

    def actions(self, task_id: str) -> list[schemas.Action]:
        return self.run(calls.actions(task_id))

    def history(self, task_id: str, language: str = "en") -> schemas.History:
        """The Task's journal; each entry's ``said`` in ``language`` (en or zh)."""
        return self.run(calls.history(task_id, language))

    def state_at(self, task_id: str, version: int) -> schemas.TaskWithActions:
        return self.run(calls.state_at(task_id, version))

    def resume(self, task_id: str) -> schemas.TaskWithActions:
        return self.run(calls.resume(task_id))

    def cancel(self, task_id: str) -> schemas.TaskWithActions:
        return self.run(calls.cancel(task_id))

    def confirm(
        self, task_id: str, yes: bool = True, *, version: int | None = None
    ) -> schemas.TaskWithActions:
        return self.run(calls.confirm(task_id, yes, version=version))

    def fill(self, task_id: str, slots: Mapping[str, Any]) -> schemas.TaskWithActions:
        return self.run(calls.fill(task_id, slots))

    def unpin(self, task_id: str, reason: str) -> schemas.TaskWithActions:
        return self.run(calls.unpin(task_id, reason))

    def resolve(
        self, action_id: str, outcome: Literal["success", "failed"], output: Any = None
    ) -> schemas.TaskWithActions:
        return self.run(calls.resolve(action_id, outcome, output))

    def rerun(self, action_id: str) -> schemas.TaskWithActions:
        return self.run(calls.rerun(action_id))

    def events_token(self, task_id: str) -> schemas.EventsToken:
        return self.run(calls.events_token(task_id))

    def events(self, task_id: str) -> Iterator[schemas.TaskWithActions]:
        """The Task now, then again at every change, until the caller stops iterating."""
        call = calls.events(task_id)
        with self._http.stream(**request(self.base_url, self._key, call)) as response:
            if response.status_code >= 400:
                response.read()
                answer(response, call)
            events = Events()
            for line in response.iter_lines():
                found = events.feed(line)
                if found is not None and found[0] == "task":
                    yield call.read(found[1])

    # -- memory --------------------------------------------------------------------------------
    def add_memory(self, namespace: str, items: Sequence[Mapping[str, Any]]) -> schemas.Added:
        return self.run(calls.add_memory(namespace, items))

    def memory_item(self, namespace: str, item_id: str) -> schemas.MemoryItem:
        return self.run(calls.memory_item(namespace, item_id))

    def search(
        self,
        namespace: str,
        q: str,
        *,
        k: int = 10,
        mode: calls.Mode = "hybrid",
        since: datetime | None = None,
        until: datetime | None = None,
        source: Sequence[str] = (),
        task_id: Sequence[str] = (),
    ) -> list[schemas.Hit]:
        return self.run(
            calls.search(
                namespace,
                q,
                k=k,
                mode=mode,
                since=since,
                until=until,
                source=source,
                task_id=task_id,
            )
        )

    def context(
        self,
        task_id: str,
        *,
        q: str | None = None,
        budget: int | None = None,
        window: int | None = None,
    ) -> schemas.Context:
        return self.run(calls.context(task_id, q=q, budget=budget, window=window))

    # -- operators and health ------------------------------------------------------------------
    def builds(self) -> list[schemas.Build]:
        return self.run(calls.builds())

    def workers(self, *, stopped: bool = False) -> list[schemas.Worker]:
        return self.run(calls.workers(stopped=stopped))

    def ready(self) -> bool:
        return self.run(calls.ready())
