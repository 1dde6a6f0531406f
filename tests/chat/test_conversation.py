"""Conversation scripts with the demo agents, in Chinese and English, in one process and
with a new process for every turn (``relaystate say``), plus a crash in the middle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope, TaskStatus
from relaystate.conversation import Conversation, Turn
from relaystate.demo import Ledger

# (what the user says, a piece the reply must contain)
FLIGHT_ZH = [
    ("我要订机票，从北京到上海", "哪天出发"),
    ("下周三", "经济舱、商务舱还是头等舱"),
    ("头等舱", "乘机人"),
    ("不对，改成商务舱", "乘机人"),
    ("李雷", "请确认您的机票预订"),
    ("是的", "已完成"),
]
FLIGHT_EN = [
    ("I'd like to book a flight from Beijing to Shanghai", "On which date?"),
    ("next Wednesday", "Economy, business or first?"),
    ("economy", "Who is travelling?"),
    ("actually make it business class", "Who is travelling?"),
    ("Alice Wang", "Please confirm your flight booking"),
    ("yes", "Done: your flight booking is complete. Reference: ORD-"),
]
REFUND_EN = [
    ("I want a refund", "order number"),
    ("it is 1001", "does not match the expected form"),
    ("ORD-10001", "Why do you want a refund?"),
    ("it stopped working", "How much"),
    ("$120", "amount: 120"),
    ("yes", "Done: your refund is complete. Reference: REF-"),
]
REFUND_ZH = [
    ("我要退款", "订单号"),
    ("订单号是ORD-10002", "退款原因"),
    ("质量有问题", "退多少钱"),
    ("500元", "超过了上限（49）"),
    ("40元", "请确认您的退款"),
    ("是", "已完成：您的退款已办理"),
]
AFTER_SALES_ZH = [
    ("我的手机充不进电", "型号"),
    ("Mate 60", "什么时候买的"),
    ("2026年6月1日", "请确认您的售后服务"),
    ("好的", "已完成"),
]
AFTER_SALES_EN = [
    ("my phone won't charge, I tried another cable", "Which phone model"),
    ("an iPhone 15", "When did you buy it?"),
    ("2024-01-15", "Please confirm your after-sales service"),
    ("no", "OK, what would you like to change?"),
    ("yes", "Done: your after-sales service is complete. Reference: PAI-"),
]
SCRIPTS = {
    "after_sales_en": AFTER_SALES_EN,
    "flight_zh": FLIGHT_ZH,
    "flight_en": FLIGHT_EN,
    "refund_en": REFUND_EN,
    "refund_zh": REFUND_ZH,
    "after_sales_zh": AFTER_SALES_ZH,
}


def shape(turn: dict[str, Any]) -> tuple[Any, ...]:
    task = turn["task"] or {}
    return (turn["reply"], task.get("stage"), task.get("status"), task.get("slots"))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_scripts_in_one_process(conv: Conversation, name: str) -> None:
    for text, expected in SCRIPTS[name]:
        turn = conv.handle(Scope.user("alice"), text, "s1")
        assert expected in turn.reply, (text, turn.reply)
    assert turn.state is not None and not turn.state.task.status.is_open


def test_slot_values_are_plain_json_and_corrections_keep_history(conv: Conversation) -> None:
    for text, _ in FLIGHT_EN[:5]:
        turn = conv.handle(Scope.user("alice"), text, "s1")
    assert turn.state is not None
    assert turn.state.task.slots == {
        "origin": "Beijing",
        "destination": "Shanghai",
        "date": "2026-12-02",
        "cabin_class": "business",
        "passenger_name": "Alice Wang",
    }
    _, entries = conv.runtime.history(Scope.user("alice"), turn.state.task.id)
    cabins = [c.get("after") for e in entries for c in e.changes if c["path"][-1] == "cabin_class"]
    assert cabins == ["economy", "business"]  # the old value stays in the journal


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_new_process_per_turn_gives_identical_turns(
    conv: Conversation, tmp_path: Path, name: str
) -> None:
    in_process = [
        shape(conv.handle(Scope.user("alice"), text, "s1").to_dict()) for text, _ in SCRIPTS[name]
    ]
    store = f"sqlite:///{tmp_path}/say.db"
    ledger = str(tmp_path / "say-ledger.db")
    separate = []
    for text, _ in SCRIPTS[name]:
        turn = say(text, store, ledger)
        separate.append(shape(turn))
    assert separate == in_process


def say(
    text: str, store: str, ledger: str, *, user: str = "alice", session: str = "s1", **env: str
) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "relaystate.cli",
            "say",
            text,
            "--user",
            user,
            "--session",
            session,
            "--json",
            "--store",
            store,
            "--ledger",
            ledger,
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_two_tasks_in_one_session_keep_their_own_slots(conv: Conversation) -> None:
    conv.handle(Scope.user("alice"), "book a flight from Beijing to Shanghai", "s1")
    turn = conv.handle(Scope.user("alice"), "I also want a refund", "s1")
    assert turn.state is not None and turn.state.task.type == "refund"
    conv.handle(Scope.user("alice"), "ORD-10001", "s1")
    turn = conv.handle(Scope.user("alice"), "continue", "s1")  # back to the most recent: the refund
    assert "refund" in turn.reply
    open_types = {t.type: t for t in conv.runtime.open_tasks(Scope.user("alice"))}
    assert open_types["flight_booking"].slots == {"origin": "Beijing", "destination": "Shanghai"}
    assert open_types["refund"].slots == {"order_number": "ORD-10001"}


def test_leaving_and_continuing_from_a_new_session(conv: Conversation) -> None:
    conv.handle(Scope.user("alice"), "我要订机票，从北京到上海", "phone")
    turn = conv.handle(Scope.user("alice"), "继续", "laptop")
    assert turn.reply.startswith("欢迎回来。您的机票预订（出发地：北京，目的地：上海）还差日期。")
    turn = conv.handle(Scope.user("alice"), "明天", "laptop")
    assert turn.state is not None and turn.state.task.slots["date"] == "2026-11-30"


def test_continue_with_several_open_tasks_lists_them_to_pick(conv: Conversation) -> None:
    conv.handle(Scope.user("alice"), "book a flight from Paris", "a")
    conv.handle(Scope.user("alice"), "I want a refund", "b")
    turn = conv.handle(Scope.user("alice"), "where were we?", "c")
    assert "You have 2 unfinished tasks" in turn.reply and "1) refund" in turn.reply
    turn = conv.handle(Scope.user("alice"), "2", "c")
    assert turn.state is not None and turn.state.task.type == "flight_booking"
    assert "Welcome back" in turn.reply and "Where are you flying to?" in turn.reply


def test_cancelling_and_switching_language(conv: Conversation) -> None:
    turn = conv.handle(Scope.user("alice"), "book a flight from Paris to Rome", "s1")
    assert turn.language == "en"
    turn = conv.handle(Scope.user("alice"), "算了，取消吧", "s1")
    assert turn.reply == "已取消您的机票预订。" and turn.language == "zh"
    assert turn.state is not None and turn.state.task.status == TaskStatus.CANCELLED
    turn = conv.handle(Scope.user("alice"), "hello", "s1")
    assert turn.reply.startswith("I can help with: flight booking, refund")


def test_messages_follow_the_task_and_nobody_else_sees_them(conv: Conversation) -> None:
    conv.handle(Scope.user("alice"), "I want a refund", "s1")
    said = conv.runtime.messages(Scope.user("alice"), "s1")
    assert [(m.role, m.text) for m in said] == [
        ("user", "I want a refund"),
        ("assistant", "What is the order number (like ORD-10001)?"),
    ]
    assert conv.runtime.messages(Scope.user("mallory"), "s1") == []
    with pytest.raises(Exception, match="no session s1"):
        conv.handle(Scope.user("mallory"), "hi", "s1")


def test_a_crash_while_creating_the_order_tells_the_real_outcome(tmp_path: Path) -> None:
    store, ledger = f"sqlite:///{tmp_path}/crash.db", str(tmp_path / "crash-ledger.db")
    for text, _ in FLIGHT_EN[:5]:
        say(text, store, ledger)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "relaystate.cli",
            "say",
            "yes",
            "--user",
            "alice",
            "--session",
            "s1",
            "--json",
            "--store",
            store,
            "--ledger",
            ledger,
        ],
        env={**os.environ, "RELAYSTATE_FAILPOINTS": "after_effect:create_order=crash"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9
    turn = say("continue", store, ledger)
    assert turn["reply"].startswith("Done: your flight booking is complete. Reference: ORD-00001")
    entries = Ledger(ledger).entries()
    assert [(e["kind"], e["requests"], e["effects"]) for e in entries] == [("order", 1, 1)]


def test_bad_input_to_say_is_one_line_and_exit_2(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/bad.db"
    for args, message in (
        (["say", "", "--user", "u"], "nothing to say"),
        (["say", "hi", "--user", "u", "--lang", "fr"], "argument --lang: invalid choice"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "relaystate.cli", *args, "--store", store],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_turn_json_has_the_documented_names(conv: Conversation) -> None:
    turn: Turn = conv.handle(Scope.user("alice"), "book a flight from Beijing", "s1")
    data = turn.to_dict()
    assert {"session_id", "reply", "task", "actions"} <= set(data)
    assert set(data["task"]) >= {
        "id",
        "type",
        "stage",
        "status",
        "slots",
        "missing_slots",
        "progress",
        "status_text",
        "version",
    }


class ScriptedModel:
    """Stands in for a hosted model (the OpenAI-compatible client has its own wire tests)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def route(self, text: str, candidates: Any, *, language: str) -> Any:
        return None

    def extract(self, text: str, slots: Any, *, language: str, today: Any) -> dict[str, Any]:
        return dict(self.answer)

    def summarize(self, texts: Any, *, language: str, max_words: int) -> str | None:
        return None

    def rephrase(self, reply: str, *, language: str) -> str:
        return reply


def test_a_model_fills_in_only_where_rules_found_nothing_and_is_validated(
    conv: Conversation,
) -> None:
    conv.handle(Scope.user("alice"), "book a flight from Beijing", "s1")
    conv.model = ScriptedModel({"destination": "Shanghai", "cabin_class": "luxury"})
    turn = conv.handle(Scope.user("alice"), "somewhere famous for soup dumplings", "s1")
    assert turn.state is not None
    assert turn.state.task.slots == {"origin": "Beijing", "destination": "Shanghai"}


def test_an_explicit_task_id_routes_the_turn(conv: Conversation, tmp_path: Path) -> None:
    refund = conv.handle(Scope.user("alice"), "I want a refund", "s1").state
    conv.handle(Scope.user("alice"), "book a flight from Paris", "s1")
    assert refund is not None
    turn = conv.handle(Scope.user("alice"), "ORD-10003", "s2", task_id=refund.task.id)
    assert turn.state is not None and turn.state.task.slots == {"order_number": "ORD-10003"}
    with pytest.raises(Exception, match="no task"):
        conv.handle(Scope.user("mallory"), "ORD-10003", "m1", task_id=refund.task.id)
