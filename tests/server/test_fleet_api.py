"""``/v1/builds`` and ``/v1/workers`` for operators, and a newer build's Task refused with
503 ``task_too_new`` (nothing written) so that a proxy asks another process."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import Runtime, Scope
from relaystate.workers.presence import Presence

from .test_api import Api, error

ALICE = Scope.user("alice")


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    made = Api(tmp_path)
    yield made
    made.rt.close()


def test_operators_see_builds_and_workers_and_users_do_not(api: Api) -> None:
    Presence(api.rt, role="api").beat()  # this server, registered as build "dev"
    api.rt.start(ALICE, "flight_booking", slots={"origin": "Beijing"})
    builds = api.ok("ops", "GET", "/v1/builds")["builds"]
    assert builds == [
        {
            "build": "dev",
            "processes": {"api": 1},
            "pinned_open_tasks": 0,
            "open_tasks_started": 1,
            "queued_pinned_work": 0,
            "can_retire": True,
        }
    ]
    (worker,) = api.ok("ops", "GET", "/v1/workers")["workers"]
    assert worker["role"] == "api" and worker["build"] == "dev" and worker["claimed"] == 0
    for path in ("/v1/builds", "/v1/workers"):
        error(api.call("alice", "GET", path), 403, "forbidden")
        error(api.call(None, "GET", path), 401, "unauthorized")


def test_a_task_of_a_newer_template_version_is_left_to_a_newer_build(api: Api) -> None:
    newer = [copy.copy(t) for t in api.rt.templates.values()]
    for t in newer:
        t.version += 1
    v2 = Runtime(api.rt.stores, newer, build="v2")
    tid = v2.start(ALICE, "flight_booking", slots={"origin": "Beijing"}).task.id
    before = api.ok("alice", "GET", f"/v1/tasks/{tid}/history")
    answer = api.call("alice", "POST", f"/v1/tasks/{tid}/cancel")
    assert "newer build" in error(answer, 503, "task_too_new")
    assert answer.headers["Retry-After"]
    assert api.ok("alice", "GET", f"/v1/tasks/{tid}/history") == before


def test_an_operator_unpins_a_task_left_by_a_retired_build(api: Api) -> None:
    pinned = [copy.copy(t) for t in api.rt.templates.values()]
    for t in pinned:
        t.upgrade = "pinned"
    old = Runtime(api.rt.stores, pinned, build="old")  # the same version, another build
    tid = old.start(ALICE, "flight_booking", slots={"origin": "Beijing"}).task.id
    assert api.ok("ops", "GET", "/v1/builds")["builds"][-1]["pinned_open_tasks"] == 1
    path = f"/v1/tasks/{tid}/unpin"
    error(api.call("alice", "POST", path, json={"reason": "mine"}), 403, "forbidden")
    error(api.call("ops", "POST", path, json={"reason": ""}), 422, "invalid_input")
    error(api.call("ops", "POST", "/v1/tasks/nope/unpin", json={"reason": "x"}), 404, "not_found")
    task = api.ok("ops", "POST", path, json={"reason": "build old retired"})["task"]
    assert task["id"] == tid and task["pinned"] is False
    last = api.ok("ops", "GET", f"/v1/tasks/{tid}/history")["entries"][-1]
    assert last["reason"] == "unpinned from build 'old' by admin:ops: build old retired"
    assert all(b["pinned_open_tasks"] == 0 for b in api.ok("ops", "GET", "/v1/builds")["builds"])
