"""Security headers on every kind of answer of the real app (in process): JSON, every error
(404, 405, 422, 429, 413 both ways, a 500 of a bug), metrics, health, static files, the
dashboard, an event stream and the docs pages. Pages get a policy that runs only this
server's own scripts and styles; everything else may load nothing; nothing may be framed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from relaystate import Runtime, Scope, open_store
from relaystate.demo import templates
from relaystate.server import apidocs, create_app, headers
from relaystate.server.api_keys import issue

ALWAYS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
BOOK = "book a flight from Beijing to Shanghai"


class App:
    def __init__(self, tmp_path: Path, **options: Any) -> None:
        self.rt = Runtime(open_store(f"sqlite:///{tmp_path}/h.db"), templates(tmp_path / "l.db"))
        _, key = issue(
            self.rt, Scope.admin("test"), "alice", name="alice", admin=False, now=self.rt.clock()
        )
        self.auth = {"Authorization": f"Bearer {key}"}
        options = {"rate": 1000.0, "burst": 1000.0, "recover_on_start": False, **options}
        self.app: FastAPI = create_app(self.rt, **options)
        self.client = TestClient(self.app, raise_server_exceptions=False)


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    app = App(tmp_path)
    yield app
    app.rt.close()


def secured(found: MutableMapping[str, str], policy: str) -> None:
    for name, value in ALWAYS.items():
        assert found.get(name) == value, (name, dict(found))
    assert found.get("content-security-policy") == policy, dict(found)


def directives(policy: str) -> dict[str, str]:
    parts = (d.strip().split(" ", 1) for d in policy.split(";"))
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts}


def test_the_policies_run_nothing_inline_and_nothing_from_another_host() -> None:
    for policy in (headers.PAGE_POLICY, apidocs.SWAGGER_POLICY, apidocs.REDOC_POLICY):
        found = directives(policy)
        assert found["default-src"] == "'none'" and found["frame-ancestors"] == "'none'"
        assert found["script-src"] == "'self'", policy  # no inline script, no eval
        assert found["base-uri"] == found["form-action"] == "'none'"
        assert "http" not in policy and "*" not in policy, policy
    assert directives(headers.PAGE_POLICY)["style-src"] == "'self'"
    assert directives(apidocs.SWAGGER_POLICY)["style-src"] == "'self'"
    assert directives(headers.API_POLICY) == {"default-src": "'none'", "frame-ancestors": "'none'"}


def test_json_health_metrics_and_static_files_get_the_api_policy(made: App) -> None:
    c = made.client
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/ui/app.js", "/ui/style.css"):
        answer = c.get(path)
        assert answer.status_code == 200, (path, answer.text)
        secured(answer.headers, headers.API_POLICY)
    assert c.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert c.get("/docs-assets/favicon.png").headers["content-security-policy"] == (
        headers.API_POLICY
    )
    me = c.get("/v1/me", headers=made.auth)
    assert me.status_code == 200 and me.json()["user_id"] == "alice"
    secured(me.headers, headers.API_POLICY)
    turn = c.post("/v1/sessions/s1/messages", headers=made.auth, json={"text": BOOK})
    assert turn.status_code == 200, turn.text
    secured(turn.headers, headers.API_POLICY)


def test_every_error_gets_them(made: App) -> None:
    c = made.client
    cases = {
        401: c.get("/v1/me"),
        404: c.get("/no/such/page"),
        405: c.delete("/healthz"),
        422: c.get("/v1/tasks", headers=made.auth, params={"limit": "many"}),
        400: c.post(
            "/v1/sessions/s1/messages",
            headers={**made.auth, "Content-Type": "application/json"},
            content=b"{not json",
        ),
    }
    for status, answer in cases.items():
        assert answer.status_code == status, (status, answer.status_code, answer.text)
        assert answer.headers["content-type"].startswith("application/json")
        secured(answer.headers, headers.API_POLICY)
    assert cases[405].headers["allow"]  # the route's own headers are kept beside them


def test_a_500_of_a_bug_and_the_limits_get_them(tmp_path: Path) -> None:
    made = App(tmp_path, rate=0.001, burst=1.0, max_body=1024)
    try:

        def boom() -> None:
            raise RuntimeError("a bug")

        made.app.add_api_route("/boom", boom)
        c = made.client
        crashed = c.get("/boom")
        assert crashed.status_code == 500 and crashed.json()["error"]["code"] == "internal"
        secured(crashed.headers, headers.API_POLICY)

        big = c.post("/v1/sessions/s1/messages", headers=made.auth, content=b"x" * 2048)
        assert big.status_code == 413, big.text
        secured(big.headers, headers.API_POLICY)

        def chunks() -> Iterator[bytes]:  # no Content-Length: refused as it streams in
            yield b"x" * 1000
            yield b"x" * 1000

        streamed = c.post("/v1/sessions/s1/messages", headers=made.auth, content=chunks())
        assert streamed.status_code == 413, streamed.text
        secured(streamed.headers, headers.API_POLICY)

        assert c.get("/v1/me", headers=made.auth).status_code == 200  # the one token
        limited = c.get("/v1/me", headers=made.auth)
        assert limited.status_code == 429 and limited.headers["retry-after"], limited.text
        secured(limited.headers, headers.API_POLICY)
    finally:
        made.rt.close()


def test_the_dashboard_gets_the_page_policy(made: App) -> None:
    for path in ("/", "/ui/index.html"):
        answer = made.client.get(path)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        secured(answer.headers, headers.PAGE_POLICY)
        # What the policy forbids is not in the page: no inline script, style or handler.
        page = answer.text
        scripts = re.findall(r"<script\b[^>]*>", page)
        assert scripts and all(" src=" in tag for tag in scripts), scripts
        assert "<style" not in page and "javascript:" not in page
        assert not re.search(r"<[^>]*\s(style|on[a-z]+)\s*=", page), "a style or on*= attribute"


def test_the_docs_pages_keep_their_own_policy_and_load_only_files(made: App) -> None:
    swagger = made.client.get("/docs")
    secured(swagger.headers, apidocs.SWAGGER_POLICY)
    assert '<script src="/docs-assets/swagger-ui-bundle.js">' in swagger.text
    assert '<script src="/docs/start.js">' in swagger.text
    assert "<script>" not in swagger.text
    start = made.client.get("/docs/start.js")
    assert start.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle(" in start.text
    secured(start.headers, headers.API_POLICY)
    redoc = made.client.get("/redoc")
    secured(redoc.headers, apidocs.REDOC_POLICY)
    assert '<redoc spec-url="/openapi.json">' in redoc.text and "<script>" not in redoc.text


def test_a_header_a_route_sets_is_kept(made: App) -> None:
    def framed() -> JSONResponse:
        return JSONResponse(
            {"ok": True},
            headers={"Content-Security-Policy": "frame-ancestors 'self'", "X-Frame-Options": "X"},
        )

    made.app.add_api_route("/framed", framed)
    answer = made.client.get("/framed")
    assert answer.headers["content-security-policy"] == "frame-ancestors 'self'"
    assert answer.headers["x-frame-options"] == "X"
    assert answer.headers.get_list("x-frame-options") == ["X"]  # not sent twice
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_an_event_stream_gets_them(made: App) -> None:
    """The stream never ends by itself: read the start of the answer, then hang up."""
    turn = made.client.post("/v1/sessions/s1/messages", headers=made.auth, json={"text": BOOK})
    task_id = turn.json()["turn"]["task"]["id"]
    auth = made.auth["Authorization"].encode()
    started: list[MutableMapping[str, Any]] = []
    requested = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        while not started:
            await anyio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"/v1/tasks/{task_id}/events",
        "raw_path": f"/v1/tasks/{task_id}/events".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", auth), (b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }

    async def call() -> None:
        with anyio.fail_after(10):
            await made.app(scope, receive, send)

    anyio.run(call)
    assert started and started[0]["status"] == 200, started
    found = {k.decode().lower(): v.decode() for k, v in started[0]["headers"]}
    assert found["content-type"].startswith("text/event-stream")
    assert found["cache-control"] == "no-store"
    secured(found, headers.API_POLICY)
