"""The journal in people's words, for a template declared here: what changed for the user first
(slots by their labels, stages and statuses by their names for people, Actions by name),
bookkeeping apart; in English and Chinese; the same from the CLI and from the HTTP API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from relaystate import (
    ActionContext,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
    user_confirmed,
)
from relaystate.runtime.narrate import BOOKKEEPING_ACTION, narrate, task_type
from relaystate.server import create_app
from relaystate.server.api_keys import issue

ALICE = Scope.user("alice")


def repair() -> TaskTemplate:
    template = TaskTemplate(
        "bike_repair",
        titles={"en": "bike repair", "zh": "自行车维修"},
        slots=[
            Slot("frame_number", labels={"en": "frame number", "zh": "车架号"}),
            Slot("fault", labels={"zh": "故障"}),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots, labels={"zh": "收集信息"}),
            Stage("confirming", exit=user_confirmed, labels={"en": "awaiting your OK"}),
            Stage("booking", actions=["book_slot"], labels={"zh": "预约中"}),
            Stage("done", labels={"zh": "已完成"}),
        ],
    )

    @template.action(side_effect=True, idempotent=True)
    def book_slot(ctx: ActionContext) -> dict[str, Any]:
        return {"workshop": "Gràcia", "at": "2026-12-03T10:00"}

    return template


def templates() -> list[TaskTemplate]:
    """For ``--app tests.test_narrate:templates``."""
    return [repair()]


@pytest.fixture
def rt(sqlite_url: str) -> Iterator[Runtime]:
    with Runtime(open_store(sqlite_url), [repair()]) as runtime:
        yield runtime


def booked(rt: Runtime) -> str:
    task = rt.start(ALICE, "bike_repair", slots={"frame_number": "WTU-1"}).task
    rt.fill(ALICE, task.id, {"fault": "the chain slips"})
    rt.confirm(ALICE, task.id)
    return task.id


def told(rt: Runtime, task_id: str, language: str) -> list[list[str]]:
    baseline, entries = rt.history(ALICE, task_id)
    return [
        t.said
        for t in narrate(baseline, entries, rt.labels(task_type(baseline, entries), language))
    ]


def test_each_entry_says_what_changed_in_the_templates_words(rt: Runtime) -> None:
    task_id = booked(rt)
    assert told(rt, task_id, "en") == [
        ["started in stage collecting with frame number=WTU-1"],
        ["stage: collecting → awaiting your OK", "fault set to the chain slips"],
        [
            "stage: awaiting your OK → booking",
            "status: waiting for you → in progress",
            "confirmed by the user",
            "Action book_slot recorded (running)",
        ],
        [
            "stage: booking → done",
            "status: in progress → done",
            "book_slot: running → succeeded",
            'book_slot returned {"workshop": "Gràcia", "at": "2026-12-03T10:00"}',
        ],
    ]


def test_the_same_journal_in_chinese(rt: Runtime) -> None:
    """A label declared only in English stands in for the Chinese one (the stage
    ``confirming``); the runtime's own words are Chinese."""
    task_id = booked(rt)
    assert told(rt, task_id, "zh") == [
        ["开始，阶段为收集信息，已有 车架号=WTU-1"],
        ["阶段：收集信息 → awaiting your OK", "故障设为 the chain slips"],
        [
            "阶段：awaiting your OK → 预约中",
            "状态：等待您 → 办理中",
            "用户已确认",
            "已记录操作 book_slot（执行中）",
        ],
        [
            "阶段：预约中 → 已完成",
            "状态：办理中 → 已完成",
            "book_slot：执行中 → 成功",
            'book_slot 返回 {"workshop": "Gràcia", "at": "2026-12-03T10:00"}',
        ],
    ]


def test_bookkeeping_is_kept_apart_and_every_change_is_still_there(rt: Runtime) -> None:
    task_id = booked(rt)
    baseline, entries = rt.history(ALICE, task_id)
    for entry, words in zip(entries, narrate(baseline, entries), strict=True):
        assert words.said, f"v{entry.version} says nothing to people: {entry.changes}"
        leases = [k for k in words.bookkeeping if k.split(".")[-1] in BOOKKEEPING_ACTION]
        assert all(k.startswith("book_slot.") for k in leases), leases
    assert [w.bookkeeping for w in narrate(baseline, entries)][1:] == [
        ["missing_slots", "status_text"],
        ["due_at", "status_text"],
        [
            "due_at",
            "progress",
            "status_text",
            "book_slot.lease_owner",
            "book_slot.lease_expires_at",
            "book_slot.updated_at",
        ],
    ]


def test_a_type_the_server_no_longer_runs_is_told_with_its_names_as_words(rt: Runtime) -> None:
    task_id = booked(rt)
    baseline, entries = rt.history(ALICE, task_id)
    said = narrate(baseline, entries, rt.labels("gone_type", "zh"))
    assert said[0].said == ["开始，阶段为collecting，已有 frame number=WTU-1"]


def test_the_http_api_and_the_cli_say_the_same(rt: Runtime, sqlite_url: str, capsys: Any) -> None:
    task_id = booked(rt)
    _, key = issue(rt, Scope.admin("ops"), "alice", name="alice", admin=False, now=rt.clock())
    with TestClient(create_app(rt)) as client:
        auth = {"Authorization": f"Bearer {key}"}
        zh = client.get(f"/v1/tasks/{task_id}/history?language=zh", headers=auth).json()
        en = client.get(f"/v1/tasks/{task_id}/history", headers=auth).json()
        bad = client.get(f"/v1/tasks/{task_id}/history?language=fr", headers=auth)
    assert [e["said"] for e in zh["entries"]] == told(rt, task_id, "zh")
    assert [e["said"] for e in en["entries"]] == told(rt, task_id, "en")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"
    from relaystate.cli import main

    app = "tests.test_narrate:templates"
    main(
        [
            "tasks",
            "history",
            task_id,
            "--user",
            "alice",
            "--store",
            sqlite_url,
            "--app",
            app,
            "--json",
        ]
    )
    printed = json.loads(capsys.readouterr().out)
    assert [e["said"] for e in printed["entries"]] == told(rt, task_id, "en")
