"""PostgreSQL stopped under a running ``relaystate serve`` (issue 10): while the store is away
every request that needs it answers 503 with a JSON error body (never a 500, never a hang),
``/readyz`` fails and ``/healthz`` still answers; when PostgreSQL is back the same server
process serves again by itself, and every turn it had answered 200 is there.

The real server runs as a subprocess on a throwaway cluster from tests/services.py, talked to
over HTTP. Without PostgreSQL binaries the test skips; under ``CI=true`` it fails instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .. import services
from .serving import Server

NOW = "2026-11-29T10:00:00"
TIMEOUT = 20.0
"""Seconds any one request may take, the outage included: a hang fails the test."""
DOWN_FOR = 15.0
"""Seconds PostgreSQL stays away: long enough for a connection pool's reconnection backoff to
grow past BACK_WITHIN (1 + 2 + 4 + 8 s), so a server that waited on its pool would be late."""
BACK_WITHIN = 3.0
"""Seconds after PostgreSQL is up again by which the server must serve again."""
QUICK = 2.0
"""Seconds a request may take while the store is known to be away."""
CONVERSATIONS = {  # session -> turns, each answered 200 before the outage
    "s-flight": ["book a flight from Beijing to Shanghai", "Dec 9, economy, for Alice Wang", "yes"],
    "s-refund": ["I want a refund for order ORD-12345"],
}


@pytest.fixture
def server(pg_cluster: services.PostgresCluster, tmp_path: Path) -> Iterator[Server]:
    srv = Server(pg_cluster.url, tmp_path)
    try:
        yield srv
    finally:
        srv.stop()


def _unavailable(answer: httpx.Response, what: str) -> None:
    """A clear 503: the error body the API promises, and when to try again."""
    assert answer.status_code == 503, f"{what}: {answer.status_code} {answer.text}"
    assert answer.headers["content-type"].startswith("application/json"), what
    error = answer.json()["error"]
    assert error["code"] == "unavailable" and error["message"], f"{what}: {error}"
    assert answer.headers.get("retry-after"), f"{what}: no Retry-After"


def test_a_store_outage_answers_503_and_service_resumes_by_itself(
    pg_cluster: services.PostgresCluster, server: Server
) -> None:
    key = json.loads(server.cli("users", "create", "alice", "--json"))["api_key"]
    server.start()
    api = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT
    )

    # -- before: turns that return 200 are committed ------------------------------------------
    committed: dict[str, int] = {}  # task id -> the version its last 200 turn returned
    said: dict[str, int] = {}  # session -> turns answered 200
    for session, lines in CONVERSATIONS.items():
        for text in lines:
            answer = api.post(f"/v1/sessions/{session}/messages", json={"text": text})
            assert answer.status_code == 200, answer.text
            task = answer.json()["turn"]["task"]
            assert task is not None, answer.text
            committed[task["id"]] = task["version"]
            said[session] = said.get(session, 0) + 1
    flight = api.get(f"/v1/tasks/{next(iter(committed))}").json()["task"]
    assert flight["status"] == "done" and flight["actions"], flight

    # -- PostgreSQL goes away, as by a crash -------------------------------------------------
    pg_cluster.stop(mode="immediate")
    down = time.monotonic()
    slowest = 0.0
    for round_ in range(2):  # the first requests find broken pooled connections, then refusals
        for method, path, body in (
            ("POST", "/v1/sessions/s-flight/messages", {"text": "book another flight"}),
            ("POST", "/v1/sessions/s-new/messages", {"text": "I want a refund for ORD-999"}),
            ("POST", "/v1/sessions", {}),
            ("GET", f"/v1/tasks/{next(iter(committed))}", None),
            ("GET", "/v1/tasks?status=all", None),
            ("GET", "/v1/sessions/s-flight/messages", None),
            ("GET", "/v1/me", None),
        ):
            started = time.monotonic()
            answer = api.request(method, path, json=body)
            slowest = max(slowest, time.monotonic() - started)
            _unavailable(answer, f"{method} {path} (round {round_ + 1})")
        _unavailable(httpx.get(f"{server.url}/readyz", timeout=TIMEOUT), "/readyz")
        health = httpx.get(f"{server.url}/healthz", timeout=TIMEOUT)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert httpx.get(f"{server.url}/metrics", timeout=TIMEOUT).status_code == 200
    while time.monotonic() - down < DOWN_FOR:  # the store stays away; answers stay quick
        started = time.monotonic()
        _unavailable(api.get("/v1/tasks"), "GET /v1/tasks while PostgreSQL is away")
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.5)
    assert server.proc is not None and server.proc.poll() is None, server.output()
    assert slowest < QUICK, f"a request took {slowest:.2f} s while the store was away"
    print(f"store down: every answer a 503 (slowest {slowest:.2f} s)")

    # -- PostgreSQL is back: the same process serves again, without a restart ----------------
    pg_cluster.start()
    up = time.monotonic()
    while True:
        answer = api.get("/v1/me")
        if answer.status_code == 200:
            break
        _unavailable(answer, "GET /v1/me while PostgreSQL starts")
        assert time.monotonic() - up < BACK_WITHIN, "the server did not serve again in time"
        time.sleep(0.2)
    back = time.monotonic() - up
    ready = httpx.get(f"{server.url}/readyz", timeout=TIMEOUT)
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}, ready.text
    print(f"outage {up - down:.1f} s; serving again {back:.2f} s after PostgreSQL was up")

    # -- nothing committed is lost, nothing refused was half-written --------------------------
    for task_id, version in committed.items():
        answer = api.get(f"/v1/tasks/{task_id}")
        assert answer.status_code == 200, answer.text
        assert answer.json()["task"]["version"] >= version, answer.text
    for session, turns in said.items():
        found = api.get(f"/v1/sessions/{session}/messages").json()["messages"]
        assert len(found) == 2 * turns, [(m["role"], m["text"]) for m in found]
    assert api.get("/v1/sessions/s-new").status_code == 404  # its only turn was refused
    answer = api.post("/v1/sessions/s-after/messages", json={"text": "book a flight to Beijing"})
    assert answer.status_code == 200 and answer.json()["turn"]["task"], answer.text
    api.close()

    log = server.output()
    assert "Traceback" not in log and "unexpected error" not in log, log[-3000:]
