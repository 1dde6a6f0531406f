"""The HTTP API, endpoint by endpoint, through the real app over a real SQLite file: every
answer a JSON body, every bad input a 4xx with a code, never a 500 and never a partial
write, and another user's ids answer 404 on every endpoint that takes one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from relaystate import Runtime, Scope, open_store
from relaystate.demo import templates
from relaystate.server import create_app
from relaystate.server.api_keys import issue

BOOK = "book a flight from Beijing to Shanghai on Dec 9, economy, for Alice Wang"
ADMIN = Scope.admin("test")


class Api:
    """The app and a key per person: alice, bob, and an operator with an admin key."""

    def __init__(self, tmp_path: Path, *, store: str | None = None, **options: Any) -> None:
        url = store or f"sqlite:///{tmp_path}/api.db"
        self.rt = Runtime(open_store(url), templates(tmp_path / "l.db"))
        self.keys = {
            who: issue(self.rt, ADMIN, who, name=who, admin=who == "ops", now=self.rt.clock())[1]
            for who in ("alice", "bob", "ops")
        }
        options = {"rate": 1000.0, "burst": 1000.0, "recover_on_start": False, **options}
        self.client = TestClient(create_app(self.rt, **options), raise_server_exceptions=False)

    def call(self, who: str | None, method: str, path: str, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        headers.update(kw.pop("headers", {}))
        return self.client.request(method, path, headers=headers, **kw)

    def ok(self, who: str, method: str, path: str, status: int = 200, **kw: Any) -> Any:
        answer = self.call(who, method, path, **kw)
        assert answer.status_code == status, (path, answer.status_code, answer.text)
        return answer.json()


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    made = Api(tmp_path)
    yield made
    made.rt.close()


def error(answer: Any, status: int, code: str) -> str:
    """The answer is ``status`` with the JSON error body of ``code``; its message."""
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.headers["content-type"].startswith("application/json")
    found = answer.json()
    assert set(found) == {"error"} and found["error"]["code"] == code, found
    message: str = found["error"]["message"]
    assert message and "Traceback" not in message
    return message


def booked(api: Api, who: str = "alice", session: str = "s-alice") -> dict[str, Any]:
    turn: dict[str, Any] = api.ok(
        who, "POST", f"/v1/sessions/{session}/messages", json={"text": BOOK}
    )["turn"]
    assert turn["task"]["stage"] == "confirming"
    return turn


# -- who is calling ------------------------------------------------------------------------------
def test_every_v1_call_needs_a_valid_key(api: Api) -> None:
    error(api.call(None, "GET", "/v1/me"), 401, "unauthorized")
    for bad in ("nope", "rsk_x_y", "Bearer", api.keys["alice"] + "x", "rsk_" + "a" * 300):
        answer = api.client.get("/v1/me", headers={"Authorization": f"Bearer {bad}"})
        error(answer, 401, "unauthorized")
    assert api.ok("alice", "GET", "/v1/me") == {
        "user_id": "alice",
        "admin": False,
        "key_id": api.keys["alice"].split("_")[1],
    }
    assert api.ok("ops", "GET", "/v1/me")["admin"] is True


def test_a_revoked_key_is_refused_at_once(api: Api) -> None:
    assert api.ok("bob", "GET", "/v1/me")["user_id"] == "bob"
    api.rt.revoke_api_keys(ADMIN, user_id="bob")
    error(api.call("bob", "GET", "/v1/me"), 401, "unauthorized")
    assert api.ok("alice", "GET", "/v1/me")["user_id"] == "alice"


def test_a_key_over_its_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    slow = Api(tmp_path, rate=0.5, burst=2.0)
    try:
        assert slow.call("alice", "GET", "/v1/me").status_code == 200
        assert slow.call("alice", "GET", "/v1/me").status_code == 200
        refused = slow.call("alice", "GET", "/v1/me")
        error(refused, 429, "rate_limited")
        assert int(refused.headers["Retry-After"]) >= 1
        assert slow.call("bob", "GET", "/v1/me").status_code == 200  # per key
    finally:
        slow.rt.close()


# -- sessions and turns --------------------------------------------------------------------------
def test_a_conversation_through_the_api(api: Api) -> None:
    session = api.ok("alice", "POST", "/v1/sessions", 201, json={"language": "en"})["session"]
    assert session["user_id"] == "alice" and session["version"] == 1
    sid = session["id"]
    turn = api.ok("alice", "POST", f"/v1/sessions/{sid}/messages", json={"text": BOOK})["turn"]
    assert turn["session_id"] == sid and "Please confirm" in turn["reply"]
    assert turn["why"] and turn["task"]["type"] == "flight_booking"
    done = api.ok("alice", "POST", f"/v1/sessions/{sid}/messages", json={"text": "yes"})["turn"]
    assert done["task"]["status"] == "done" and "Reference: ORD-" in done["reply"]
    assert {a["name"]: a["status"] for a in done["actions"]} == {
        "search_flights": "success",
        "create_order": "success",
    }
    assert api.ok("alice", "GET", f"/v1/sessions/{sid}")["session"]["active_task_ids"] == [
        turn["task"]["id"]
    ]
    said = api.ok("alice", "GET", f"/v1/sessions/{sid}/messages")["messages"]
    assert [(m["role"], m["text"]) for m in said][:2] == [
        ("user", BOOK),
        ("assistant", turn["reply"]),
    ]
    page = api.ok("alice", "GET", f"/v1/sessions/{sid}/messages?limit=2")
    assert [m["id"] for m in page["messages"]] == [3, 4] and page["next_before"] == 3
    older = api.ok("alice", "GET", f"/v1/sessions/{sid}/messages?limit=2&before=3")
    assert [m["id"] for m in older["messages"]] == [1, 2] and older["next_before"] is None


def test_a_turn_in_chinese_and_a_first_message_that_opens_its_session(api: Api) -> None:
    turn = api.ok("alice", "POST", "/v1/sessions/new-one/messages", json={"text": "我要退款"})[
        "turn"
    ]
    assert turn["language"] == "zh" and "订单号" in turn["reply"]
    assert api.ok("alice", "GET", "/v1/sessions/new-one")["session"]["language"] == "zh"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ('{"text": ', 400, "invalid_json"),
        ("[1, 2]", 422, "invalid_input"),
        ("{}", 422, "invalid_input"),
        ('{"text": ""}', 422, "invalid_input"),
        ('{"text": "   "}', 422, "invalid_input"),
        ('{"text": 5}', 422, "invalid_input"),
        ('{"text": "hi", "extra": 1}', 422, "invalid_input"),
        ('{"text": "hi", "language": "fr"}', 422, "invalid_input"),
        ('{"text": "hi\\u0000there"}', 422, "invalid_input"),
        ('{"text": "\\ud800"}', 422, "invalid_input"),
        (json.dumps({"text": "a" * 10_001}), 422, "invalid_input"),
        (json.dumps({"text": "a" * 300_000}), 413, "too_large"),
        ('{"text": "hi", "task_id": "no-such-task"}', 404, "not_found"),
    ],
)
def test_a_bad_turn_is_a_4xx_and_writes_nothing(
    api: Api, body: str, status: int, code: str
) -> None:
    answer = api.call(
        "alice",
        "POST",
        "/v1/sessions/s-bad/messages",
        content=body.encode("utf-8", "surrogatepass"),
        headers={
            "Authorization": f"Bearer {api.keys['alice']}",
            "Content-Type": "application/json",
        },
    )
    error(answer, status, code)
    error(api.call("alice", "GET", "/v1/sessions/s-bad"), 404, "not_found")  # nothing written
    assert api.rt.tasks(ADMIN) == []


@pytest.mark.parametrize(
    "path",
    ["/v1/tasks?limt=5", "/v1/tasks?status=all&=x", "/healthz?verbose=1", "/v1/sessions/s1?x="],
)
def test_an_unknown_query_parameter_is_refused_not_ignored(api: Api, path: str) -> None:
    answer = api.call("alice", "GET", path)
    error(answer, 422, "invalid_input")
    assert "is not a query parameter of this operation" in answer.json()["error"]["message"]


# -- tasks ----------------------------------------------------------------------------------
def test_tasks_their_actions_history_and_replayed_state(api: Api) -> None:
    turn = booked(api)
    tid = turn["task"]["id"]
    api.ok("alice", "POST", "/v1/sessions/s-alice/messages", json={"text": "yes"})
    assert [t["id"] for t in api.ok("alice", "GET", "/v1/tasks?status=all")["tasks"]] == [tid]
    assert api.ok("alice", "GET", "/v1/tasks")["tasks"] == []  # open: none left
    assert [t["id"] for t in api.ok("alice", "GET", "/v1/tasks?status=done")["tasks"]] == [tid]
    task = api.ok("alice", "GET", f"/v1/tasks/{tid}")["task"]
    assert task["status"] == "done" and [a["name"] for a in task["actions"]] == [
        "search_flights",
        "create_order",
    ]
    actions = api.ok("alice", "GET", f"/v1/tasks/{tid}/actions")["actions"]
    assert actions == task["actions"]
    history = api.ok("alice", "GET", f"/v1/tasks/{tid}/history")
    versions = [e["version"] for e in history["entries"]]
    assert versions == list(range(1, task["version"] + 1)) and history["baseline"] is None
    first = api.ok("alice", "GET", f"/v1/tasks/{tid}/state?at=1")["task"]
    assert first["stage"] == "confirming" and first["actions"] == [] and first["version"] == 1
    error(
        api.call("alice", "GET", f"/v1/tasks/{tid}/state?at={task['version'] + 1}"),
        404,
        "not_found",
    )
    error(api.call("alice", "GET", f"/v1/tasks/{tid}/state?at=0"), 422, "invalid_input")
    error(api.call("alice", "GET", f"/v1/tasks/{tid}/state"), 422, "invalid_input")
    error(api.call("alice", "GET", "/v1/tasks?status=bogus"), 422, "invalid_input")
    error(api.call("alice", "GET", "/v1/tasks?limit=0"), 422, "invalid_input")


def test_confirm_is_bound_to_the_version_shown_and_cancel_is_final(api: Api) -> None:
    tid = booked(api)["task"]["id"]
    api.ok(
        "alice", "POST", "/v1/sessions/s-alice/messages", json={"text": "make it business class"}
    )
    stale = api.call("alice", "POST", f"/v1/tasks/{tid}/confirm", json={"yes": True, "version": 1})
    error(stale, 409, "confirmation_changed")
    error(
        api.call("alice", "POST", f"/v1/tasks/{tid}/confirm", json={"yes": "yes"}),
        422,
        "invalid_input",
    )
    current = api.ok("alice", "GET", f"/v1/tasks/{tid}")["task"]["version"]
    assert api.ok("alice", "GET", f"/v1/tasks/{tid}")["task"]["slots"]["cabin_class"] == "business"
    cancelled = api.ok("alice", "POST", f"/v1/tasks/{tid}/cancel")["task"]
    assert cancelled["status"] == "cancelled" and cancelled["version"] == current + 1
    error(api.call("alice", "POST", f"/v1/tasks/{tid}/cancel"), 409, "task_locked")
    error(
        api.call("alice", "POST", f"/v1/tasks/{tid}/confirm", json={"yes": True}),
        409,
        "task_locked",
    )
    assert api.ok("alice", "POST", f"/v1/tasks/{tid}/resume")["task"]["status"] == "cancelled"


def test_confirm_at_the_version_shown_runs_the_task(api: Api) -> None:
    task = booked(api)["task"]
    done = api.ok(
        "alice",
        "POST",
        f"/v1/tasks/{task['id']}/confirm",
        json={"yes": True, "version": task["version"]},
    )["task"]
    assert done["status"] == "done"


def test_resolving_an_action_is_an_operators_act(api: Api) -> None:
    tid = booked(api)["task"]["id"]
    api.ok("alice", "POST", "/v1/sessions/s-alice/messages", json={"text": "yes"})
    action = api.ok("alice", "GET", f"/v1/tasks/{tid}/actions")["actions"][-1]
    path = f"/v1/actions/{action['id']}/resolve"
    error(api.call("alice", "POST", path, json={"outcome": "success"}), 403, "forbidden")
    error(api.call("ops", "POST", path, json={"outcome": "maybe"}), 422, "invalid_input")
    error(api.call("ops", "POST", path, json={"outcome": "failed"}), 409, "task_locked")  # settled
    error(
        api.call("ops", "POST", "/v1/actions/nope/resolve", json={"outcome": "failed"}),
        404,
        "not_found",
    )


def test_an_admin_key_reads_every_users_tasks(api: Api) -> None:
    alices = booked(api)["task"]["id"]
    bobs = booked(api, "bob", "s-bob")["task"]["id"]
    assert {t["id"] for t in api.ok("ops", "GET", "/v1/tasks")["tasks"]} == {alices, bobs}
    assert api.ok("ops", "GET", f"/v1/tasks/{alices}")["task"]["user_id"] == "alice"


# -- isolation: another user's ids are unknown ids --------------------------------------------
def test_another_users_ids_answer_404_on_every_endpoint(api: Api) -> None:
    turn = booked(api)
    tid = turn["task"]["id"]
    api.ok("alice", "POST", "/v1/sessions/s-alice/messages", json={"text": "yes"})
    aid = api.ok("alice", "GET", f"/v1/tasks/{tid}/actions")["actions"][0]["id"]
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/v1/sessions/s-alice", {}),
        ("GET", "/v1/sessions/s-alice/messages", {}),
        ("POST", "/v1/sessions/s-alice/messages", {"json": {"text": "yes"}}),
        ("GET", f"/v1/tasks/{tid}", {}),
        ("GET", f"/v1/tasks/{tid}/actions", {}),
        ("GET", f"/v1/tasks/{tid}/history", {}),
        ("GET", f"/v1/tasks/{tid}/state?at=1", {}),
        ("GET", f"/v1/tasks/{tid}/events", {}),
        ("POST", f"/v1/tasks/{tid}/resume", {}),
        ("POST", f"/v1/tasks/{tid}/cancel", {}),
        ("POST", f"/v1/tasks/{tid}/confirm", {"json": {"yes": True}}),
        ("POST", f"/v1/actions/{aid}/resolve", {"json": {"outcome": "failed"}}),
        ("POST", "/v1/sessions/s-alice/messages", {"json": {"text": "hi", "task_id": tid}}),
    ]
    before = api.rt.task(ADMIN, tid).to_dict()
    for method, path, kw in calls:
        error(api.call("bob", method, path, **kw), 404, "not_found")
    assert api.rt.task(ADMIN, tid).to_dict() == before
    assert api.ok("bob", "GET", "/v1/tasks?status=all")["tasks"] == []
    said = api.ok("alice", "GET", "/v1/sessions/s-alice/messages")["messages"]
    assert all(m["user_id"] == "alice" for m in said) and len(said) == 4


# -- live updates, health, the rest ---------------------------------------------------------------
def first_event(api: Api, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    with api.client.stream("GET", path, headers=headers or {}) as events:
        assert events.status_code == 200, events.read()
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.iter_lines()
        assert next(lines) == "event: task"
        data = next(lines)
        assert data.startswith("data: ")
        found: dict[str, Any] = json.loads(data.removeprefix("data: "))
        return found


def test_task_events_take_the_key_in_a_header_or_a_short_token_never_in_the_url(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relaystate.server import events

    tid = booked(api)["task"]["id"]
    path = f"/v1/tasks/{tid}/events"
    alice = {"Authorization": f"Bearer {api.keys['alice']}"}
    assert first_event(api, path, alice)["id"] == tid
    message = error(api.client.get(f"{path}?key={api.keys['alice']}"), 400, "key_in_url")
    assert "never goes in a URL" in message and api.keys["alice"] not in message
    minted = api.ok("alice", "POST", f"{path}/token")
    assert set(minted) == {"token", "expires_at"}
    assert api.keys["alice"].rsplit("_", 1)[-1] not in minted["token"]  # no secret in it
    assert first_event(api, f"{path}?token={minted['token']}")["id"] == tid
    error(api.client.get(f"{path}?token={minted['token']}x"), 401, "unauthorized")
    other_id = api.rt.start(Scope.user("alice"), "refund").task.id  # her other Task
    error(
        api.client.get(f"/v1/tasks/{other_id}/events?token={minted['token']}"), 401, "unauthorized"
    )
    error(api.call("bob", "POST", f"{path}/token"), 404, "not_found")
    with monkeypatch.context() as expired:
        expired.setattr(events, "TOKEN_SECONDS", -1)
        stale = api.ok("alice", "POST", f"{path}/token")["token"]
    error(api.client.get(f"{path}?token={stale}"), 401, "unauthorized")
    fresh = api.ok("alice", "POST", f"{path}/token")["token"]
    api.rt.revoke_api_keys(ADMIN, user_id="alice")
    error(api.client.get(f"{path}?token={fresh}"), 401, "unauthorized")


def test_health_readiness_and_metrics(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/readyz").json() == {"status": "ready"}
    booked(api)
    metrics = api.client.get("/metrics").text
    assert "relaystate_turns_total 1.0" in metrics
    assert 'route="/v1/sessions/{session_id}/messages"' in metrics  # templates, not ids
    assert api.client.get("/openapi.json").json()["info"]["title"] == "relaystate"


def test_unknown_paths_and_methods_answer_json(api: Api) -> None:
    error(api.call("alice", "GET", "/v1/nothing-here"), 404, "not_found")
    error(api.call("alice", "DELETE", "/v1/tasks"), 405, "method_not_allowed")


def test_the_dashboard_is_served_at_the_root(api: Api) -> None:
    page = api.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_the_header_replays_and_refuses(api: Api) -> None:
    path = "/v1/sessions/s-key/messages"
    key = {"Idempotency-Key": "3f6c2a9e-9d41-4a58-8d1e-6b1f0c8a7e21"}
    first = api.call("alice", "POST", path, json={"text": BOOK}, headers=key)
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    again = api.call("alice", "POST", path, json={"text": BOOK}, headers=key)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["turn"]["reply"] == first.json()["turn"]["reply"]
    assert again.json()["turn"]["task"]["id"] == first.json()["turn"]["task"]["id"]
    messages = api.ok("alice", "GET", path)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert all("request_key" not in m for m in messages)  # stored, never shown

    other = api.call("alice", "POST", path, json={"text": "cancel"}, headers=key)
    assert "other words" in error(other, 409, "idempotency_key_reused")
    elsewhere = api.call(
        "alice", "POST", "/v1/sessions/s-2/messages", json={"text": BOOK}, headers=key
    )
    error(elsewhere, 409, "idempotency_key_reused")
    for bad in ("", "two words", "x" * 256):
        answer = api.call(
            "alice", "POST", path, json={"text": BOOK}, headers={"Idempotency-Key": bad}
        )
        assert answer.status_code == 422, (bad, answer.text)
        assert answer.json()["error"]["code"] in ("invalid_input", "invalid_request"), answer.text
    bobs = api.call(
        "bob", "POST", "/v1/sessions/s-bob/messages", json={"text": BOOK}, headers=key
    )  # a key is its user's: bob's same key is his own request
    assert bobs.status_code == 200 and "idempotent-replayed" not in bobs.headers
    assert len(api.ok("alice", "GET", path)["messages"]) == 2
