"""The HTTP server: the ``/v1`` API with per-user keys, health and metrics, and the
dashboard. Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client).

``create_app`` loads on first use, so ``relaystate.server.schemas`` (the API's records,
pydantic only) can be imported by a client without FastAPI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name != "create_app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .app import create_app

    return create_app
