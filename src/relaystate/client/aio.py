"""The asynchronous client of the HTTP API (httpx): the same methods as
:class:`~relaystate.client.Client`, each awaited."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

import httpx

from ..server import schemas
from . import calls
from .calls import Call, T
from .transport import AGAIN, Events, answer, request, should_retry, wait


class AsyncClient:
    """``AsyncClient(base_url, api_key)``: :class:`~relaystate.client.Client`'s methods,
    awaited (``async with AsyncClient(...) as client: await client.task(task_id)``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        tries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url, self._key, self.tries, self.backoff = base_url, api_key, tries, backoff
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def run(self, call: Call[T]) -> T:
        """Send one call (with its retries) and read its answer."""
        for attempt in range(self.tries):
            response: httpx.Response | None = None
            try:
                response = await self._http.request(**request(self.base_url, self._key, call))
            except AGAIN:
                if not should_retry(call, None, attempt, self.tries):
                    raise
            else:
                if not should_retry(call, response, attempt, self.tries):
                    return answer(response, call)
            await asyncio.sleep(wait(attempt, response, self.backoff))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the caller, agents, sessions and turns -----------------------------------------------
    async def me(self) -> schemas.Me:
        return await self.run(calls.me())

    async def agents(self) -> schemas.Agents:
        return await self.run(calls.agents())

    async def new_session(self, language: str | None = None) -> schemas.Session:
        return await self.run(calls.new_session(language))

    async def session(self, session_id: str) -> schemas.Session:
        return await self.run(calls.session(session_id))

    async def messages(
        self, session_id: str, *, limit: int = 50, before: int | None = None
    ) -> schemas.Messages:
        return await self.run(calls.messages(session_id, limit=limit, before=before))

    async def say(
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
        return await self.run(
            calls.say(session_id, text, key=key, language=language, task_id=task_id)
        )

    # -- tasks and their actions ---------------------------------------------------------------
    async def tasks(self, status: str = "open", *, limit: int = 100) -> list[schemas.Task]:
        return await self.run(calls.tasks(status, limit=limit))

    async def task(self, task_id: str) -> schemas.TaskWithActions:
        return await self.run(calls.task(task_id))

    async def actions(self, task_id: str) -> list[schemas.Action]:
        return await self.run(calls.actions(task_id))

    async def history(self, task_id: str, language: str = "en") -> schemas.History:
        """The Task's journal; each entry's ``said`` in ``language`` (en or zh)."""
        return await self.run(calls.history(task_id, language))

    async def state_at(self, task_id: str, version: int) -> schemas.TaskWithActions:
        return await self.run(calls.state_at(task_id, version))

    async def resume(self, task_id: str) -> schemas.TaskWithActions:
        return await self.run(calls.resume(task_id))

    async def cancel(self, task_id: str) -> schemas.TaskWithActions:
        return await self.run(calls.cancel(task_id))

    async def confirm(
        self, task_id: str, yes: bool = True, *, version: int | None = None
    ) -> schemas.TaskWithActions:
        return await self.run(calls.confirm(task_id, yes, version=version))

    async def fill(self, task_id: str, slots: Mapping[str, Any]) -> schemas.TaskWithActions:
        return await self.run(calls.fill(task_id, slots))

    async def unpin(self, task_id: str, reason: str) -> schemas.TaskWithActions:
        return await self.run(calls.unpin(task_id, reason))

    async def resolve(
        self, action_id: str, outcome: Literal["success", "failed"], output: Any = None
    ) -> schemas.TaskWithActions:
        return await self.run(calls.resolve(action_id, outcome, output))

    async def rerun(self, action_id: str) -> schemas.TaskWithActions:
        return await self.run(calls.rerun(action_id))

    async def events_token(self, task_id: str) -> schemas.EventsToken:
        return await self.run(calls.events_token(task_id))

    async def events(self, task_id: str) -> AsyncIterator[schemas.TaskWithActions]:
        """The Task now, then again at every change, until the caller stops iterating."""
        call = calls.events(task_id)
        async with self._http.stream(**request(self.base_url, self._key, call)) as response:
            if response.status_code >= 400:
                await response.aread()
                answer(response, call)
            events = Events()
            async for line in response.aiter_lines():
                found = events.feed(line)
                if found is not None and found[0] == "task":
                    yield call.read(found[1])

    # -- memory --------------------------------------------------------------------------------
    async def add_memory(self, namespace: str, items: Sequence[Mapping[str, Any]]) -> schemas.Added:
        return await self.run(calls.add_memory(namespace, items))

    async def memory_item(self, namespace: str, item_id: str) -> schemas.MemoryItem:
        return await self.run(calls.memory_item(namespace, item_id))

    async def search(
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
        return await self.run(
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

    async def context(
        self,
        task_id: str,
        *,
        q: str | None = None,
        budget: int | None = None,
        window: int | None = None,
    ) -> schemas.Context:
        return await self.run(calls.context(task_id, q=q, budget=budget, window=window))

    # -- operators and health ------------------------------------------------------------------
    async def builds(self) -> list[schemas.Build]:
        return await self.run(calls.builds())

    async def workers(self, *, stopped: bool = False) -> list[schemas.Worker]:
        return await self.run(calls.workers(stopped=stopped))

    async def ready(self) -> bool:
        return await self.run(calls.ready())
