"""The ``/v1/memory`` endpoints: a user's long-term memory, per namespace (add items, read
one, search). The key's user is the only owner reachable: there is no admin read of
someone's memory here; an operator acts as the user through the command line."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from ..errors import NotFound, StoreURLError
from ..inputs import DEFAULT_MAX_TEXT, ID_PATTERN, MAX_ID, TEXT_PATTERN
from ..memory.longterm import MAX_K, LongTermMemory, Mode
from ..model import MemoryItem
from ..store.roles import MemoryFilter
from . import schemas
from .bodies import JsonData, PlainText
from .errors import BY_ID, EVERY_CALL, WRITES
from .routes import Id, Who, server

router = APIRouter(prefix="/v1/memory", responses=EVERY_CALL, tags=["memory"])
MAX_ITEMS = 1000
"""Items one request may add (a bigger import is several requests, or the command line)."""


class ItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: StrictStr = Field(min_length=1, max_length=MAX_ID, pattern=ID_PATTERN)
    text: StrictStr = Field(min_length=1, max_length=DEFAULT_MAX_TEXT, pattern=TEXT_PATTERN)
    time: datetime | None = Field(None, description="When it was said or happened (ISO 8601)")
    source: StrictStr | None = Field(None, min_length=1, max_length=MAX_ID, pattern=ID_PATTERN)
    metadata: dict[PlainText, JsonData] = Field(default_factory=dict)

    @field_validator("time", mode="before")
    @classmethod
    def _iso_text(cls, value: object) -> object:
        """A time is ISO 8601 text, as the schema says (not a number of seconds)."""
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an ISO 8601 time (text)")
        return value


class ItemsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[ItemIn] = Field(min_length=1, max_length=MAX_ITEMS)


class ItemOut(BaseModel):
    item: schemas.MemoryItem


class HitsOut(BaseModel):
    hits: list[schemas.Hit] = Field(description="The best items, best first")
    embedder: str | None = Field(
        description="The embedder whose vectors the search compared (its name, as stored "
        "beside every vector); null: keyword search only"
    )


def memory_of(request: Request) -> LongTermMemory:
    found = server(request).memory
    if found is None:
        raise StoreURLError("this store keeps no long-term memory")
    return found


@router.post("/{namespace}/items", response_model=schemas.Added, responses=WRITES)
def add_items(request: Request, who: Who, namespace: Id, body: ItemsIn) -> schemas.Added:
    """Add or replace items (by id); their vectors are made in the background, and so are
    their facts when the server has an extractor (``serve --extractor``)."""
    memory = memory_of(request)
    items = [
        MemoryItem(i.id, who.key.user_id, namespace, i.text, i.time, i.source, None, i.metadata)
        for i in body.items
    ]
    added = memory.add(who.acts, namespace, items)
    server(request).embed_later(who.acts, namespace, extract=items)
    return schemas.Added(added=added, total=memory.count(who.acts, namespace))


@router.get("/{namespace}/items/{item_id}", response_model=ItemOut, responses=BY_ID)
def get_item(request: Request, who: Who, namespace: Id, item_id: Id) -> ItemOut:
    found = memory_of(request).get(who.acts, namespace, [item_id])
    if not found:
        raise NotFound(f"no memory item {item_id} in {namespace}")
    return ItemOut(item=schemas.MemoryItem.model_validate(item_view(found[0])))


@router.get("/{namespace}/search", response_model=HitsOut)
def search(
    request: Request,
    who: Who,
    namespace: Id,
    q: Annotated[
        str,
        Query(
            min_length=1,
            max_length=DEFAULT_MAX_TEXT,
            pattern=TEXT_PATTERN,
            description="What to look for",
        ),
    ],
    k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
    mode: Mode = "hybrid",
    since: datetime | None = None,
    until: datetime | None = None,
    source: Annotated[list[PlainText] | None, Query(max_length=20)] = None,
    task_id: Annotated[list[PlainText] | None, Query(max_length=20)] = None,
) -> HitsOut:
    """The items that answer ``q`` best: keyword and vector search fused (a filter value
    holding a NUL is refused, 422, as no backend can compare it)."""
    where = MemoryFilter(since, until, tuple(source or ()), tuple(task_id or ()))
    memory = memory_of(request)
    hits = memory.search(who.acts, namespace, q, k=k, where=where, mode=mode)
    return HitsOut(
        hits=[
            schemas.Hit.model_validate({**item_view(h.item), "score": h.score, "ranks": h.ranks})
            for h in hits
        ],
        embedder=None if memory.embedder is None or mode == "keyword" else memory.embedder.name,
    )


tasks = APIRouter(prefix="/v1/tasks", responses=EVERY_CALL, tags=["memory"])


@tasks.get("/{task_id}/context", response_model=schemas.Context, responses=BY_ID)
def task_context(
    request: Request,
    who: Who,
    task_id: Id,
    q: Annotated[
        str | None,
        Query(
            max_length=DEFAULT_MAX_TEXT,
            pattern=r"^[^\x00]*$",
            description="Default: the latest turn",
        ),
    ] = None,
    budget: Annotated[int | None, Query(ge=16, le=1_000_000, description="Tokens")] = None,
    window: Annotated[int | None, Query(ge=64, le=2_000_000, description="Model window")] = None,
) -> schemas.Context:
    """The prompt the task's next turn would get from memory, within ``budget`` tokens (or,
    without one, 80% of ``window``, default 8192), and why each candidate was kept or
    dropped."""
    from ..memory.assemble import task_context as build

    state = server(request)
    if state.layers is None:
        raise StoreURLError("this store keeps no memory")
    found = build(
        state.layers,
        state.runtime.task(who.reads, task_id),
        query=q,
        window=None if budget is not None else window,
        budget=budget,
    )
    ctx = found.context
    return schemas.Context(
        query=found.query,
        prompt=ctx.prompt,
        tokens=ctx.tokens,
        budget=ctx.budget,
        explanation=[
            schemas.Kept(
                id=d.id, layer=d.layer, score=d.score, tokens=d.tokens, kept=d.kept, reason=d.reason
            )
            for d in ctx.explanation
        ],
    )


def item_view(item: MemoryItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "namespace": item.namespace,
        "text": item.text,
        "time": item.time.isoformat() if item.time else None,
        "source": item.source,
        "task_id": item.task_id,
        "metadata": item.metadata,
        "cites": list(item.cites),
        "added_at": item.added_at.isoformat() if item.added_at else None,
    }
