"""A Python client of relaystate's HTTP API (httpx), synchronous and asynchronous.

    from relaystate.client import Client

    with Client("http://127.0.0.1:8700", api_key) as client:
        turn = client.say("s1", "I want a refund for ORD-10001")
        task = client.task(turn.task.id)

Every endpoint has its method; answers are the API's typed records
(``relaystate.server.schemas``: ``Task``, ``Action``, ``Turn``...), and an error answer raises
the library's own error (``NotFound``, ``VersionConflict``, any ``Conflict``...), or
``Unauthorized``, ``RateLimited``, ``ServerError``. Needs the ``client`` extra (httpx,
pydantic).
"""

from __future__ import annotations

from .aio import AsyncClient
from .errors import ApiError, RateLimited, ServerError, Unauthorized
from .sync import Client

__all__ = ["ApiError", "AsyncClient", "Client", "RateLimited", "ServerError", "Unauthorized"]
