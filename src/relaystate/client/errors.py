"""An error answer of the HTTP API as the library's own error: the same classes a program
using the runtime in process catches (``except NotFound``, ``except Conflict``...), read
back from the body's ``code``; and the few the HTTP layer alone has."""

from __future__ import annotations

from typing import Any

from ..errors import CODES, RelaystateError, StoreUnavailable


class ApiError(RelaystateError):
    """An error answer with no class of the library: its ``status`` and ``code`` say it."""


class Unauthorized(ApiError):
    """No API key, or an unknown or revoked one (401)."""


class RateLimited(ApiError):
    """Too many requests for this key (429): wait ``retry_after`` seconds."""


class ServerError(ApiError):
    """The server failed on a bug (500); it has logged it."""


BY_CODE: dict[str, type[RelaystateError]] = {
    **{code: cls for cls, code in CODES.items() if code not in ("unavailable", "bad_request")},
    "unavailable": StoreUnavailable,
    "unauthorized": Unauthorized,
    "rate_limited": RateLimited,
    "internal": ServerError,
}
"""The class of each code (every error class of ``relaystate.errors`` has one)."""


def from_answer(status: int, body: Any, headers: Any) -> RelaystateError:
    """The error an error answer stands for, with ``status``, ``code`` and, for 429 and 503,
    ``retry_after`` (seconds) set on it."""
    found = body.get("error") if isinstance(body, dict) else None
    code = str(found.get("code", "")) if isinstance(found, dict) else ""
    message = str(found.get("message", "")) if isinstance(found, dict) else ""
    cls = BY_CODE.get(code, ApiError)
    error = cls.__new__(cls)  # the class itself, whatever its own constructor takes
    Exception.__init__(error, message or f"HTTP {status}")
    error.status, error.code = status, code or f"http_{status}"  # type: ignore[attr-defined]
    wait = headers.get("retry-after") if headers is not None else None
    error.retry_after = float(wait) if wait and wait.replace(".", "", 1).isdigit() else None  # type: ignore[attr-defined]
    return error
