"""One JSON POST within one deadline, over the standard library's ``http.client``: what the
chat client and the embeddings client share. Every socket operation gets what is left of the
deadline, so a server that trickles its answer cannot hold a call past it, and the body is
read in chunks under a size cap."""

from __future__ import annotations

import http.client
import ssl
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """What came back: the status, the whole body, and the ``Retry-After`` header if any."""

    status: int
    body: bytes
    retry_after: str | None


class TransportError(Exception):
    """No answer to use: ``reason`` in words; ``retryable`` for timeouts and dropped
    connections; ``too_large`` when the body passed the cap (the server answered)."""

    def __init__(self, reason: str, *, retryable: bool, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.retryable, self.too_large = reason, retryable, too_large


def post(
    host: str,
    port: int | None,
    path: str,
    body: bytes,
    *,
    https: bool,
    api_key: str | None,
    timeout: float,
    max_bytes: int,
) -> Answer:
    """POST ``body`` as JSON (with ``Authorization: Bearer`` when a key is given)."""
    deadline = time.monotonic() + timeout
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "relaystate",
    }
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn: http.client.HTTPConnection
    if https:
        conn = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    response: http.client.HTTPResponse | None = None
    chunks: list[bytes] = []
    try:
        conn.connect()
        sock = conn.sock
        assert sock is not None
        sock.settimeout(remaining(deadline))
        conn.request("POST", path, body=body, headers=headers)
        sock.settimeout(remaining(deadline))
        response = conn.getresponse()
        size = 0
        while True:
            sock.settimeout(remaining(deadline))
            chunk = response.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise TransportError(
                    f"the response is larger than {max_bytes} bytes",
                    retryable=False,
                    too_large=True,
                )
            chunks.append(chunk)
    except TimeoutError:
        raise TransportError(f"no answer within {timeout:g}s", retryable=True) from None
    except ssl.SSLError as exc:
        raise TransportError(f"TLS failed: {exc}", retryable=False) from None
    except (OSError, http.client.HTTPException) as exc:
        reason = f"the connection failed: {type(exc).__name__}: {exc}"
        raise TransportError(reason, retryable=True) from None
    finally:
        if response is not None:
            response.close()
        conn.close()
    return Answer(response.status, b"".join(chunks), response.getheader("Retry-After"))


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; TimeoutError when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
