"""Every failure of a request as an HTTP status and one JSON body,
``{"error": {"code": ..., "message": ...}}``: 4xx for what the caller can fix, 503 while the
store is away, and 500 only for a bug (logged with its traceback, shown without it)."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    Conflict,
    HistoryCompacted,
    InvalidInput,
    InvalidSlot,
    NotFound,
    RelaystateError,
    SchemaTooNew,
    ScopeError,
    StoreError,
    TemplateError,
    code_of,
)
from ..store import translate_error

log = logging.getLogger("relaystate.server")

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotFound, 404),
    (HistoryCompacted, 410),
    (Conflict, 409),
    (InvalidInput, 422),
    (InvalidSlot, 422),
    (TemplateError, 422),
    (ScopeError, 403),
    (StoreError, 503),
    (SchemaTooNew, 503),  # a newer build serves it: a proxy asks another process
    (RelaystateError, 400),
)
"""The status of an error, by the base it has (relaystate/errors.py draws the tree): a new
kind of Conflict is a 409 without a line here."""
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


_MEANING = {
    400: "The body is not valid JSON, or the request is malformed",
    401: "No API key, or an unknown or revoked one",
    403: "Only an operator (an admin key) may do this",
    404: "No such Session, Task or Action for this key",
    409: "The Task or Session changed meanwhile, or the request conflicts with its state",
    410: "That part of the Task's history was compacted away",
    413: "The body is too large",
    422: "A field is missing, of the wrong type or out of range",
    429: "Too many requests for this key; see Retry-After",
    503: "The store is away, or a newer build serves this Task; see Retry-After",
}


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of these error statuses: all the same JSON body."""
    return {s: {"model": ErrorOut, "description": _MEANING[s]} for s in statuses}


EVERY_CALL = documented(400, 401, 422, 429, 503)
"""What any authenticated endpoint may answer besides its success."""
BY_ID = documented(404)
WRITES = documented(409, 413)
REPLAYS = documented(410)
OPERATORS = documented(403)


class ApiError(Exception):
    """A refusal the server decides itself (no key, too many requests, a body too large)."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


def body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


async def send(asgi_send: Any, status: int, code: str, message: str) -> None:
    """The JSON error answered straight from an ASGI middleware (before any route)."""
    payload = json.dumps(body(code, message)).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await asgi_send({"type": "http.response.start", "status": status, "headers": head})
    await asgi_send({"type": "http.response.body", "body": payload})


def response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(body(code, message), status_code=status, headers=headers or None)


def status_of(exc: Exception) -> tuple[int, str]:
    """The HTTP status of a relaystate error, by its base, and its code, by its class."""
    status = next((s for base, s in _STATUS if isinstance(exc, base)), None)
    if status is None:
        return 500, "internal"
    return status, code_of(exc)


def allowed_methods(request: Request) -> list[str]:
    """Every method the API documents for this path: Starlette's 405 names only the first
    route's (``GET`` for a path that also takes ``POST`` in another route)."""
    path = request.url.path
    found: set[str] = set()
    for template, methods in request.app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(template)), path):
            found.update(m.upper() for m in methods)
    return sorted(found)


_PATTERNS = {
    "ID_PATTERN": "is no valid id: printable characters only (no control, format or private-use "
    "character), no space at either end",
    "TEXT_PATTERN": "must hold something besides white space, and no NUL character",
}


def _said(problem: dict[str, Any]) -> str:
    """A validation problem in words: a pattern is named by what it means, not shown (an id's
    pattern is a thousand characters of ranges)."""
    if problem.get("type") == "string_pattern_mismatch":
        from .. import inputs

        pattern = (problem.get("ctx") or {}).get("pattern")
        for name, meaning in _PATTERNS.items():
            if pattern == getattr(inputs, name):
                return meaning
        return "has characters it may not have"
    return str(problem.get("msg", "invalid"))


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into a JSON error response."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return response(exc.status, exc.code, exc.message, **exc.headers)

    @app.exception_handler(RelaystateError)
    async def _relaystate(_: Request, exc: RelaystateError) -> JSONResponse:
        status, code = status_of(exc)
        extra = {"Retry-After": "5"} if status == 503 else {}
        return response(status, code, str(exc) or type(exc).__name__, **extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            return response(400, "invalid_json", "the request body is not valid JSON")
        first = problems[0] if problems else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return response(422, "invalid_input", f"{where}: {_said(first)}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return response(exc.status_code, code, str(exc.detail), **headers)

    @app.exception_handler(Exception)
    async def _other(request: Request, exc: Exception) -> JSONResponse:
        typed = translate_error(exc, getattr(request.app.state, "store_url", ""))
        if typed is not None:  # a database that went away mid-request, a full disk
            status, code = status_of(typed)
            return response(status, code, str(typed), **{"Retry-After": "5"})
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return response(500, "internal", "an unexpected error; it has been logged")
