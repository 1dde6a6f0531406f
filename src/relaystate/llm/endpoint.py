"""An OpenAI-compatible endpoint as both clients use it: the base URL checked once, one JSON
POST whose answer is checked (status, UTF-8, strict JSON), and transient failures asked
again with backoff. The chat model (:mod:`relaystate.llm.openai`) and the embeddings client
(:mod:`relaystate.memory.embed`) each say only what their own answers must hold.

Importing this module costs nothing: ``http.client`` and ``ssl`` load with the first request.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses that say "try again later" rather than "this request is wrong"."""
MAX_RETRY_WAIT = 30.0
"""The longest wait between attempts, whatever a ``Retry-After`` header asks for."""

T = TypeVar("T")


class EndpointError(Exception):
    """No usable answer: ``reason`` in words. ``retryable`` if asking again might help;
    ``status`` the HTTP status of an error answer; ``retry_after`` what the server asked to
    wait (seconds); ``answered`` when the server did answer, but not with usable JSON."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float = 0.0,
        answered: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.answered = answered


@dataclass(frozen=True)
class Endpoint:
    """``POST {base_url}{route}``; build it with :meth:`parse`, which checks the settings."""

    base_url: str
    https: bool
    host: str
    port: int | None
    path: str
    timeout: float
    retries: int
    backoff: float
    api_key: str = field(default="", repr=False)

    @classmethod
    def parse(
        cls,
        base_url: str,
        route: str,
        *,
        what: str,
        api_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
    ) -> Endpoint:
        """The endpoint, or ValueError naming the setting that is wrong (``what`` names the
        client in the message: "model", "embedding")."""
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{what} base URL must be http(s)://host[:port][/path], not {base_url!r}"
            )
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"put the {what} API key in api_key, not in the base URL")
        if parts.query or parts.fragment:
            raise ValueError(f"{what} base URL must not carry a query or fragment")
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if retries < 0 or backoff < 0:
            raise ValueError("retries and backoff must not be negative")
        return cls(
            base_url=base_url.strip().rstrip("/"),
            https=parts.scheme == "https",
            host=parts.hostname,
            port=parts.port,
            path=parts.path.rstrip("/") + route,
            timeout=float(timeout),
            retries=int(retries),
            backoff=float(backoff),
            api_key=api_key or "",
        )

    def post_json(self, body: bytes, *, max_bytes: int) -> Any:
        """One request within one deadline; the answer's body parsed as strict JSON."""
        from .http import TransportError, post  # http.client and ssl, on first use

        try:
            answer = post(
                self.host,
                self.port,
                self.path,
                body,
                https=self.https,
                api_key=self.api_key,
                timeout=self.timeout,
                max_bytes=max_bytes,
            )
        except TransportError as exc:
            raise EndpointError(
                exc.reason, retryable=exc.retryable, answered=exc.too_large
            ) from None
        data, status = answer.body, answer.status
        if not 200 <= status < 300:
            detail = error_message(data)
            raise EndpointError(
                f"HTTP {status}" + (f": {detail}" if detail else ""),
                retryable=status in RETRYABLE_STATUS,
                status=status,
                retry_after=retry_after(answer.retry_after),
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise EndpointError("the response body is not UTF-8", answered=True) from None
        try:
            return strict_json(text, "the response body")
        except EndpointError as exc:
            exc.answered = True
            raise

    def redact(self, text: str) -> str:
        """``text`` with the API key masked, should a server have echoed it back."""
        if self.api_key and self.api_key in text:
            text = text.replace(self.api_key, "***")
        return text


E = TypeVar("E", bound=Exception)


def with_retries(
    call: Callable[[], T],
    *,
    retries: int,
    backoff: float,
    failure: type[E],
    note: Callable[[E, int, float], None],
) -> T:
    """``call()``, asked again after a ``failure`` that is ``retryable``, at most ``retries``
    more times: waiting ``backoff``, then twice that and so on, or what the server asked
    (``retry_after``), never more than :data:`MAX_RETRY_WAIT`. ``note(error, attempt,
    delay)`` is told before each wait; the last failure is raised as it is."""
    attempt = 0
    while True:
        try:
            return call()
        except failure as exc:
            if not getattr(exc, "retryable", False) or attempt >= retries:
                raise
            attempt += 1
            asked = float(getattr(exc, "retry_after", 0.0))
            delay = min(max(backoff * 2 ** (attempt - 1), asked), MAX_RETRY_WAIT)
            note(exc, attempt, delay)
            time.sleep(delay)


def strict_json(text: str, what: str) -> Any:
    """Parse ``text`` as JSON, refusing NaN/Infinity and duplicate keys (EndpointError)."""

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        return json.loads(text, parse_constant=no_constants, object_pairs_hook=no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise EndpointError(f"{what} is not valid JSON ({exc})") from None


def error_message(data: bytes) -> str:
    """The ``error.message`` of an error body, shortened; the raw body is never logged."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        return ""
    message = " ".join(message.split())
    return message if len(message) <= 200 else message[:197] + "..."


def retry_after(value: str | None) -> float:
    """Seconds of a ``Retry-After`` header (its number form; an HTTP date counts as none)."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0
