"""``POST /v1/actions/{id}/resolve`` settles only an Action that needs a person: one whose
outcome is unknown, or one the saga stopped on (a failed compensation, an error in its own
code). An Action that failed for good was unwound; resolving it is a 409, and its failed
Task stays failed (it was once turned into a done one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from relaystate import Runtime, Scope, open_store
from relaystate.server import create_app
from relaystate.server.api_keys import issue

from .. import resolve_app
from .test_api import error

ADMIN = Scope.admin("test")


@pytest.fixture
def app(tmp_path: Path) -> Any:
    with Runtime(open_store(f"sqlite:///{tmp_path}/resolve.db"), resolve_app.templates()) as rt:
        _, secret = issue(rt, ADMIN, "ops", name="ops", admin=True, now=rt.clock())
        client = TestClient(
            create_app(rt, rate=1000.0, burst=1000.0, recover_on_start=False),
            raise_server_exceptions=False,
            headers={"Authorization": f"Bearer {secret}"},
        )
        yield rt, client


def _actions(client: TestClient, task_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/tasks/{task_id}/actions")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["actions"])


def test_an_action_that_failed_for_good_is_not_resolved(app: Any) -> None:
    rt, client = app
    task_id = rt.start(Scope.user("ops"), "shipment").task.id
    [ship] = _actions(client, task_id)
    assert ship["status"] == "failed"
    for outcome in ("success", "failed"):
        said = error(
            client.post(f"/v1/actions/{ship['id']}/resolve", json={"outcome": outcome}),
            409,
            "task_locked",
        )
        assert "nothing to resolve" in said
    task = client.get(f"/v1/tasks/{task_id}").json()["task"]
    assert (task["status"], task["version"]) == ("failed", rt.task(ADMIN, task_id).task.version)


def test_a_failed_compensation_is_resolved_and_the_saga_ends(app: Any) -> None:
    rt, client = app
    task_id = rt.start(Scope.user("ops"), "exchange").task.id
    reserve, send, release = _actions(client, task_id)
    assert [a["status"] for a in (reserve, send, release)] == ["success", "failed", "failed"]
    for refused in (reserve, send):
        answer = client.post(f"/v1/actions/{refused['id']}/resolve", json={"outcome": "success"})
        error(answer, 409, "task_locked")
    answer = client.post(f"/v1/actions/{release['id']}/resolve", json={"outcome": "success"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["task"]["status"] == "failed"  # unwound: reserve is compensated
    assert [a["status"] for a in _actions(client, task_id)] == ["compensated", "failed", "success"]
    again = client.post(f"/v1/actions/{release['id']}/resolve", json={"outcome": "failed"})
    error(again, 409, "task_locked")
