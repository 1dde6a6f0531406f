"""``/v1/builds`` and ``/v1/workers``: what ``relaystate builds`` and ``relaystate workers``
show, for an operator's admin key (a rolling upgrade watched from a browser or a script)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ..runtime.views import build_view, worker_view
from . import schemas
from .errors import EVERY_CALL, OPERATORS
from .routes import Who, server

router = APIRouter(prefix="/v1", responses=EVERY_CALL | OPERATORS, tags=["operators"])


class BuildsOut(BaseModel):
    builds: list[schemas.Build] = Field(description="The builds in service")


class WorkersOut(BaseModel):
    workers: list[schemas.Worker] = Field(description="The registered processes")


@router.get("/builds", response_model=BuildsOut)
def builds(request: Request, who: Who) -> BuildsOut:
    """Builds in service: their processes and the open Tasks pinned to each."""
    rt = server(request).runtime
    return BuildsOut(
        builds=[schemas.Build.model_validate(build_view(b)) for b in rt.builds(who.reads)]
    )


@router.get("/workers", response_model=WorkersOut)
def workers(request: Request, who: Who, stopped: bool = False) -> WorkersOut:
    """Registered processes: build, role, claimed work items, heartbeat age (``stopped``:
    those that have stopped too)."""
    rt = server(request).runtime
    now = rt.clock()
    found = rt.workers(who.reads, include_stopped=stopped)
    return WorkersOut(workers=[schemas.Worker.model_validate(worker_view(w, now)) for w in found])
