"""Requests malformed below the API, sent as raw bytes to a real server process: a broken
``Content-Length`` or chunk, an oversized head, NUL or raw bytes in a header, a body too
large for its route while it streams in, a path that is no UTF-8. Each is answered with a
4xx and the API's JSON error body, by both HTTP protocols uvicorn can run (``relaystate
serve`` runs httptools; h11 is uvicorn's other one). And the OpenAPI document states the
bounds and patterns the server checks, read the same way by an ECMA-262 engine."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from pydantic import StringConstraints, TypeAdapter
from uvicorn.server import ServerState

from relaystate import Runtime, Scope, open_store
from relaystate.inputs import MAX_COUNT
from relaystate.server import create_app
from relaystate.server.api_keys import issue
from relaystate.server.app import MAX_BODY
from relaystate.server.encoding import Utf8Only
from relaystate.server.protocol import MAX_HEAD, uvicorn_options

from .. import services
from .serving import NOW, Server, wait_ready

H11_SERVER = """
import sys, uvicorn
from relaystate import Runtime, open_store
from relaystate.server import create_app
from relaystate.server.protocol import uvicorn_options
app = create_app(Runtime(open_store(sys.argv[1]), []), recover_on_start=False)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            **uvicorn_options("h11"))
"""
"""The app under uvicorn's h11 protocol, configured as ``serve`` configures httptools."""


class H11Server:
    """The app served by uvicorn with the h11 protocol, as a process of its own."""

    def __init__(self, store: str, workdir: Path) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "h11.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", H11_SERVER, store, str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_ready(self.proc, self.url, self.output, "the h11 server")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module", params=["serve-httptools", "h11"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp(request.param)
    store = f"sqlite:///{workdir}/s.db"
    if request.param == "h11":
        server: Any = H11Server(store, workdir)
    else:
        server = Server(store, workdir)
        server.start("--no-demo-key")
    try:
        yield server
    finally:
        server.stop()


class Answer:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def error(self) -> dict[str, str]:
        """The JSON error body, checked to be one."""
        assert self.headers.get("content-type", "").startswith("application/json"), (
            self.status,
            self.headers,
            self.body[:200],
        )
        found = json.loads(self.body)
        assert set(found) == {"error"} and set(found["error"]) == {"code", "message"}, found
        assert isinstance(found["error"]["code"], str) and found["error"]["message"]
        detail: dict[str, str] = found["error"]
        return detail


def exchange(port: int, data: bytes) -> Answer:
    """Send ``data`` as it is (from a thread: the server may answer before it has read it
    all) and read one HTTP response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:

        def send() -> None:
            with contextlib.suppress(OSError):  # the server stopped reading after its answer
                sock.sendall(data)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        sender.join(timeout=30)
        return Answer(response.status, response.headers, body)


def chunks(total: int, size: int = 64 * 1024) -> bytes:
    piece = b"%x\r\n" % size + b"a" * size + b"\r\n"
    return piece * (total // size)


POST = b"POST /v1/sessions/s1/messages HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
MALFORMED = {
    "a Content-Length that is no number": (POST + b"Content-Length: abc\r\n\r\n{}", 400),
    "a negative Content-Length": (POST + b"Content-Length: -1\r\n\r\n{}", 400),
    "two Content-Lengths that differ": (
        POST + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
    ),
    "a 1 MB query string": (b"GET /healthz?q=" + b"a" * 1_000_000 + b" HTTP/1.1\r\n\r\n", 431),
    "a 10 MB header": (
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 10_000_000 + b"\r\n\r\n",
        431,
    ),
    "ten thousand small headers": (
        b"GET /healthz HTTP/1.1\r\nHost: t\r\n"
        + b"".join(b"X-%d: v\r\n" % n for n in range(10_000))
        + b"\r\n",
        431,
    ),
    "a NUL in a header value": (b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: a\x00b\r\n\r\n", 400),
    "a raw byte in a header name": (b"GET /healthz HTTP/1.1\r\nHost: t\r\nX\xffA: b\r\n\r\n", 400),
    "a NUL in the path": (b"GET /healthz\x00 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    "a raw non-ASCII byte in the path": (
        b"GET /v1/sessions/z\xff HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    ),
    "no HTTP at all (a TLS hello)": (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 400),
    "a chunk size that is no number": (
        POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        400,
    ),
    "a path that is no UTF-8": (b"GET /v1/sessions/zz%FF HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    "a query that is no UTF-8": (
        b"GET /v1/sessions/s1/messages?limit=%E9 HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    ),
    "a 10 MB chunked body": (
        POST + b"Transfer-Encoding: chunked\r\n\r\n" + chunks(10_000_000) + b"0\r\n\r\n",
        413,
    ),
    "a 10 MB body by its Content-Length": (
        POST + b"Content-Length: 10000000\r\n\r\n" + b"a" * 10_000_000,
        413,
    ),
}
CODES = {400: "bad_request", 413: "too_large", 431: "headers_too_large"}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_request_is_a_4xx_with_the_json_error_body(served: Any, case: str) -> None:
    data, status = MALFORMED[case]
    answer = exchange(served.port, data)
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.error()["code"] == CODES[status]
    # the security headers of every answer, also where the app never saw the request
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
    assert httpx.get(f"{served.url}/healthz", timeout=10).status_code == 200  # still serving


def test_a_streamed_body_over_the_limit_is_refused_before_it_ends(served: Any) -> None:
    """The 413 comes while the client is still sending: the server never waits for (or
    holds) the whole body; the chunked body here has no end at all."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(POST + b"Transfer-Encoding: chunked\r\n\r\n" + chunks(2 * MAX_BODY))
        response = http.client.HTTPResponse(sock)
        response.begin()
        answer = Answer(response.status, response.headers, response.read())
    assert answer.status == 413
    assert answer.error() == {
        "code": "too_large",
        "message": f"the request body is over {MAX_BODY:,} bytes",
    }


def test_a_broken_chunk_while_the_route_waits_for_its_body_is_no_server_error(
    served: Any,
) -> None:
    """The route has started (its headers were whole) when the body breaks: the JSON 400
    goes out, and the route ends quietly (no traceback, no second answer)."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(POST + b'Transfer-Encoding: chunked\r\n\r\n2\r\n{"')
        time.sleep(0.3)  # the route is reading the body now
        sock.sendall(b"\r\nnot-a-size\r\n")
        response = http.client.HTTPResponse(sock)
        response.begin()
        answer = Answer(response.status, response.headers, response.read())
        assert sock.recv(1024) == b""  # the one answer, then the end of the connection
    assert answer.status == 400 and answer.error()["code"] == "bad_request"
    time.sleep(0.3)
    assert "Traceback" not in served.output() and "Exception" not in served.output()


def test_a_head_just_under_the_bound_is_served(served: Any) -> None:
    pad = MAX_HEAD - 200
    data = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * pad + b"\r\n\r\n"
    answer = exchange(served.port, data)
    assert answer.status == 200, answer.body[:300]


def test_percent_encoded_utf8_in_a_path_reaches_the_routes(served: Any) -> None:
    """``%C3%A9`` is é: past the encoding check (to the key check, 401), while ``%FF`` and
    ``%FE`` (no UTF-8; both U+FFFD once replaced) are refused and never one id."""
    good = exchange(served.port, b"GET /v1/sessions/caf%C3%A9 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert good.status == 401 and good.error()["code"] == "unauthorized"
    for bad in (b"zz%FF", b"zz%FE", b"%C0%AF", b"%ED%A0%80"):  # overlong, surrogate
        answer = exchange(served.port, b"GET /v1/sessions/" + bad + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        assert answer.status == 400, bad
        assert "not valid UTF-8" in answer.error()["message"]


# -- the pieces, in process ------------------------------------------------------------------
def _run_asgi(app: Any, raw_path: bytes, query: bytes = b"") -> tuple[int, bool]:
    """The status ``app`` answers for the target, and whether the inner app was called."""
    reached = False

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        nonlocal reached
        reached = True
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "raw_path": raw_path, "path": "", "query_string": query}
    asyncio.run(app(inner)(scope, receive, send))
    return sent[0]["status"], reached


@pytest.mark.parametrize(
    ("raw_path", "query", "refused"),
    [
        (b"/v1/sessions/zz%FF", b"", True),
        (b"/v1/sessions/zz%ff", b"", True),
        (b"/v1/sessions/%E4%B8%AD%E6%96%87", b"", False),  # 中文
        (b"/v1/sessions/%F0%9F%98%80", b"", False),  # an emoji, four bytes
        (b"/v1/sessions/%F0%9F%98", b"", True),  # the same, cut short
        (b"/v1/sessions/a%2Fb", b"", False),
        (b"/v1/tasks", b"limit=5&user=%C3%A9", False),
        (b"/v1/tasks", b"user=%C3", True),
        (b"/v1/tasks", b"user=%C3&x=%A9", True),  # a sequence split by the separator
    ],
)
def test_the_encoding_check_refuses_exactly_what_is_no_utf8(
    raw_path: bytes, query: bytes, refused: bool
) -> None:
    status, reached = _run_asgi(Utf8Only, raw_path, query)
    assert (status, reached) == ((400, False) if refused else (204, True))


class _Transport(asyncio.Transport):
    """What a protocol writes, without a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = self.eof = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8700)}.get(
            name, default
        )


def _feed(protocol_name: str, pieces: list[bytes]) -> bytes:
    """What the protocol answers when the request comes in these pieces."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> bytes:
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", **uvicorn_options(protocol_name)
        )
        config.load()
        transport = _Transport()
        protocol: Any = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=ServerState(), app_state={}
        )
        protocol.connection_made(transport)
        for piece in pieces:
            protocol.data_received(piece)
        await asyncio.sleep(0.05)  # the app's task runs
        protocol.connection_lost(None)
        return bytes(transport.written)

    return asyncio.run(main())


@pytest.mark.parametrize("protocol_name", ["httptools", "h11"])
def test_the_head_bound_is_exact_however_the_bytes_arrive(protocol_name: str) -> None:
    """One byte over the bound in one piece (measured when the head is whole) and in many
    (counted as they come) is a 431; the bound itself, in many pieces, is served."""

    def head(size: int) -> bytes:
        start = b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: "
        return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"

    def pieces(data: bytes, size: int) -> list[bytes]:
        return [data[i : i + size] for i in range(0, len(data), size)]

    over = head(MAX_HEAD + 200)
    assert _feed(protocol_name, [over]).startswith(b"HTTP/1.1 431 ")
    assert _feed(protocol_name, pieces(over, 1000)).startswith(b"HTTP/1.1 431 ")
    served = _feed(protocol_name, pieces(head(MAX_HEAD - 100), 1000))
    assert served.startswith(b"HTTP/1.1 204 "), served[:200]
    answer = _feed(protocol_name, [b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n"])
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    assert (
        head_bytes.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head_bytes
    )
    assert json.loads(body)["error"]["code"] == "bad_request"


# -- the published schema ------------------------------------------------------------------
@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return create_app(Runtime(open_store("memory://"), []), recover_on_start=False).openapi()


def _patterns(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            found.add(node["pattern"])
        for value in node.values():
            found |= _patterns(value)
    elif isinstance(node, list):
        for value in node:
            found |= _patterns(value)
    return found


PYTHON_ONLY: tuple[str, ...] = (r"\A", r"\Z", r"\z", "(?P", "(?#", r"\U", r"\N{", "*+")
PYTHON_ONLY += (r"\s", r"\S", r"\w", r"\W", r"\d", r"\D", r"\b", r"\B")
PYTHON_ONLY += ("(?a", "(?i", "(?L", "(?m", "(?s", "(?u", "(?x")
"""Python-only syntax, and the classes each engine fills its own way."""


def test_no_published_pattern_holds_a_construct_read_differently_outside_python(
    document: dict[str, Any],
) -> None:
    """Python-only syntax (``\\Z``, ``(?P<``, inline flags) and the classes that each engine
    fills its own way (``\\s``: Python counts U+001C, ECMA-262 U+FEFF, Rust neither)."""
    patterns = _patterns(document)
    assert len(patterns) >= 4
    for pattern in patterns:
        for token in PYTHON_ONLY:
            assert token not in pattern, (token, pattern[:80])


def _samples(pattern: str) -> list[str]:
    """Strings at the edges of what ``pattern`` names: every character it holds, written or
    escaped, and the ones beside them, alone and between others; the ASCII ones; lengths."""
    points = {ord(c) for c in pattern}
    points |= {
        int(h, 16)
        for h in re.findall(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4}))", pattern)
        for h in h
        if h
    }
    points = {p + d for p in points | set(range(0x100)) for d in (-1, 0, 1)}
    points |= {0x1F600, 0x10FFFF, 0xFFFD, 0x2FFFF}
    chars = [chr(p) for p in sorted(points) if 0 <= p <= 0x10FFFF and not 0xD800 <= p <= 0xDFFF]
    found = ["", " ", "a", "a b", " a", "a ", "a\n", "\na", "a\nb", "x" * 255, "x" * 256]
    for c in chars:
        found += [c, "a" + c, c + "a", "a" + c + "b", c * 3]
    return found


NODE_MATCH = """
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = input.map(([pattern, samples]) => {
  const rx = new RegExp(pattern, 'u');
  return samples.map((s) => rx.test(s));
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node (an ECMA-262 engine) is absent")
def test_every_published_pattern_means_in_ecma262_what_the_server_checks(
    document: dict[str, Any],
) -> None:
    """Each pattern compiled by node (``new RegExp(p, 'u')``, as JSON Schema validators such
    as ajv compile them) accepts exactly the strings the server's own check accepts
    (pydantic-core, which the routes validate with) and Python's ``re.fullmatch``."""
    patterns = sorted(_patterns(document))
    work = [(p, _samples(p)) for p in patterns]
    done = subprocess.run(
        ["node", "-e", NODE_MATCH],
        input=json.dumps(work),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # every pattern compiles
    for (pattern, samples), ecma in zip(work, json.loads(done.stdout), strict=True):
        server = TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
        python = re.compile(pattern)
        differ = []
        for sample, in_ecma in zip(samples, ecma, strict=True):
            try:
                server.validate_python(sample)
                in_server = True
            except ValueError:
                in_server = False
            if not in_ecma == in_server == (python.fullmatch(sample) is not None):
                differ.append((ascii(sample), in_server, in_ecma))
        assert not differ, (pattern[:60], differ[:10])


def _resolve(node: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = document["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _integers(
    node: Any, document: dict[str, Any], where: str, seen: set[str]
) -> list[tuple[str, dict[str, Any]]]:
    """Every integer schema under ``node`` (a request's), but free JSON's (``JsonData``:
    the user's own values, any number)."""
    if isinstance(node, dict) and "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen or name == "JsonData":
            return []
        seen = seen | {name}
        node = _resolve(node, document)
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if node.get("type") == "integer":
            found.append((where, node))
        for key, value in node.items():
            found += _integers(value, document, f"{where}/{key}", seen)
    elif isinstance(node, list):
        for n, value in enumerate(node):
            found += _integers(value, document, f"{where}/{n}", seen)
    return found


def test_every_integer_a_request_may_send_is_published_with_both_bounds(
    document: dict[str, Any],
) -> None:
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            found += _integers(operation.get("parameters", []), document, where, set())
            found += _integers(operation.get("requestBody", {}), document, where, set())
    assert len(found) >= 8
    unbounded = [w for w, schema in found if "minimum" not in schema or "maximum" not in schema]
    assert not unbounded


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    rt = Runtime(open_store("memory://"), [])
    _, key = issue(rt, Scope.admin("test"), "alice", name="alice", admin=False, now=rt.clock())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RELAYSTATE_NOW", NOW)
        app = create_app(rt, rate=1000.0, burst=1000.0, recover_on_start=False)
        yield TestClient(app, raise_server_exceptions=False), str(key)
    rt.close()


def test_every_published_integer_bound_is_where_the_server_refuses(
    document: dict[str, Any], client: tuple[TestClient, str]
) -> None:
    """At each query parameter's published maximum and minimum the server goes on (to a 404
    for the made-up ids here, or an answer); one past either, it refuses (422)."""
    api, key = client
    headers = {"Authorization": f"Bearer {key}"}
    checked = 0
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None or not path.startswith("/v1/"):
            continue
        url = re.sub(r"\{[^}]+\}", "x", path)
        params = operation.get("parameters", [])
        required = {p["name"]: "x" for p in params if p["in"] == "query" and p.get("required")}
        for param in params:
            for _, schema in _integers(param.get("schema", {}), document, "", set()):
                for value, refused in (
                    (schema["maximum"], False),
                    (schema["maximum"] + 1, True),
                    (schema["minimum"], False),
                    (schema["minimum"] - 1, True),
                ):
                    query = {**required, param["name"]: str(value)}
                    answer = api.get(url, params=query, headers=headers)
                    assert (answer.status_code == 422) == refused, (
                        path,
                        param["name"],
                        value,
                        answer.status_code,
                        answer.text,
                    )
                checked += 1
    assert checked >= 6


def test_a_confirmation_version_is_bounded_as_published(
    document: dict[str, Any], client: tuple[TestClient, str]
) -> None:
    api, key = client
    published = _resolve(
        document["components"]["schemas"]["Confirmation"]["properties"]["version"]["anyOf"][0],
        document,
    )
    assert (published["minimum"], published["maximum"]) == (1, MAX_COUNT)
    headers = {"Authorization": f"Bearer {key}"}
    for version, status in ((MAX_COUNT, 404), (MAX_COUNT + 1, 422), (1, 404), (0, 422)):
        answer = api.post(
            "/v1/tasks/x/confirm", json={"yes": True, "version": version}, headers=headers
        )
        assert answer.status_code == status, (version, answer.text)
