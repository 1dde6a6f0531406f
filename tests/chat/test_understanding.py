"""One test per defect of issue 8, through the demo agents as a user would meet them: answers
taken for new requests, corrections dropped, replies in two languages, a cut-off chat; and
the understanding the issue asks for (routing by evidence, dates, values, recoverable
look-ups, questions about the Task at hand)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from relaystate import Scope, TaskStatus
from relaystate.conversation import Conversation, Turn

from .conftest import NOW

ALICE = Scope.user("alice")


def talk(conv: Conversation, *texts: str, session: str = "s1") -> Turn:
    turn = None
    for text in texts:
        turn = conv.handle(ALICE, text, session)
    assert turn is not None
    return turn


def task_of(turn: Turn) -> tuple[str, dict[str, object]]:
    assert turn.state is not None, turn.why
    return turn.state.task.type, dict(turn.state.task.slots)


def open_types(conv: Conversation) -> list[str]:
    return sorted(t.type for t in conv.runtime.open_tasks(ALICE))


# -- an answer is not a new request -----------------------------------------------------------


@pytest.mark.parametrize("answer", ["it came damaged", "东西到手就是坏的", "the screen broke"])
def test_an_answer_with_another_agents_words_goes_to_the_waiting_task(
    conv: Conversation, answer: str
) -> None:
    talk(conv, "I want a refund for ORD-10001")
    turn = talk(conv, answer)
    kind, slots = task_of(turn)
    assert (kind, slots["reason"]) == ("refund", answer)
    assert open_types(conv) == ["refund"]


def test_naming_an_open_refund_resumes_it_instead_of_starting_another(
    conv: Conversation,
) -> None:
    first = talk(conv, "I'd like a refund", "ORD-10001")
    for text in ("my refund please", "refund for ORD-10001"):
        turn = talk(conv, text, session="s2")
        assert turn.state is not None and first.state is not None
        assert turn.state.task.id == first.state.task.id, (text, turn.why)
        assert "reason" not in turn.state.task.slots  # "my refund please" answers nothing
    assert open_types(conv) == ["refund"]


def test_a_turn_explains_why_it_chose_its_task(conv: Conversation) -> None:
    turn = talk(conv, "refund ORD-10001 please")
    assert "refund" in turn.why and "order_number" in turn.why
    assert turn.to_dict()["why"] == turn.why


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("a ticket to Osaka for the 3rd", "flight_booking"),
        ("买张明天去成都的票", "flight_booking"),
        ("my phone keeps dying", "after_sales"),
        ("手机屏幕碎了", "after_sales"),
        ("can i get my 49 bucks back for ORD-10002", "refund"),
    ],
)
def test_a_message_without_a_trigger_routes_by_its_evidence(
    conv: Conversation, text: str, kind: str
) -> None:
    assert task_of(talk(conv, text))[0] == kind


# -- corrections stick --------------------------------------------------------------------------


def test_a_correction_at_the_confirmation_changes_the_slot_and_asks_again(
    conv: Conversation,
) -> None:
    turn = talk(conv, "refund ORD-10001, it broke, 100")
    assert turn.state is not None and turn.state.task.stage == "confirming"
    turn = talk(conv, "actually make it 120")
    assert task_of(turn)[1]["amount"] == 120 and "120" in turn.reply
    assert turn.state is not None and turn.state.task.stage == "confirming"
    done = talk(conv, "yes")
    assert done.state is not None and done.state.task.status == TaskStatus.DONE
    assert done.state.task.slots["amount"] == 120


@pytest.mark.parametrize(
    ("first", "bare", "slot", "value"),
    [
        ("refund ORD-10001, it broke, 100", "150", "amount", 150),
        ("refund ORD-10001, it broke, 100", "no, 80 not 100", "amount", 80),
        (
            "订12月5号上海到重庆的经济舱，乘机人张韦",
            "名字打错了，是张伟不是张韦",
            "passenger_name",
            "张伟",
        ),
        (
            "book a flight from Shanghai to Chongqing on dec 5, economy, for Jon Smith",
            "the name's wrong, it's John Smith",
            "passenger_name",
            "John Smith",
        ),
    ],
)
def test_a_value_at_the_confirmation_is_a_change_of_the_slot_it_fits(
    conv: Conversation, first: str, bare: str, slot: str, value: object
) -> None:
    talk(conv, first)
    turn = talk(conv, bare)
    assert task_of(turn)[1][slot] == value, turn.why
    assert turn.state is not None and turn.state.task.stage == "confirming"


@pytest.mark.parametrize(
    ("opening", "correction", "asked", "changed"),
    [
        ("从北京到上海，12月9号，头等舱", "有点贵，换成经济舱吧", "passenger_name", "cabin_class"),
        (
            "book a flight from Beijing to Paris on Dec 9, economy",
            "hmm, switch that to first",
            "passenger_name",
            "cabin_class",
        ),
        ("我要退款，订单ORD-10001，100元", "不对，退80吧", "reason", "amount"),
    ],
)
def test_the_words_around_a_correction_fill_no_other_slot(
    conv: Conversation, opening: str, correction: str, asked: str, changed: str
) -> None:
    talk(conv, opening)
    turn = talk(conv, correction)
    _, slots = task_of(turn)
    assert changed in slots and asked not in slots, slots


@pytest.mark.parametrize(
    ("text", "slot", "value"),
    [
        ("从北京到上海，周五，哦不，周六", "date", "2026-12-05"),
        ("book a flight from Beijing to Chengdu, no, Chongqing", "destination", "Chongqing"),
        ("refund ORD-10001... er no, ORD-10003", "order_number", "ORD-10003"),
        ("oops i meant osaka not tokyo", None, None),
    ],
)
def test_the_last_value_of_x_no_y_wins(
    conv: Conversation, text: str, slot: str | None, value: str | None
) -> None:
    if slot is None:  # the same, while the destination is asked for
        talk(conv, "book a flight from Beijing")
        turn = talk(conv, text)
        assert task_of(turn)[1]["destination"] == "Osaka"
        return
    assert task_of(talk(conv, text))[1][slot] == value


# -- one language per reply ------------------------------------------------------------------


def test_a_chinese_confirmation_names_choices_in_chinese(conv: Conversation) -> None:
    turn = talk(conv, "帮我订12月9号北京到大阪的经济舱，乘机人刘洋")
    assert "舱位：经济舱" in turn.reply and "economy" not in turn.reply
    assert "周三" in turn.reply  # the weekday of the date being confirmed


def test_a_city_typed_in_latin_is_named_in_chinese_in_a_chinese_reply(conv: Conversation) -> None:
    turn = talk(conv, "帮我订flight，北京飞Dubai，12月20号，商务舱，乘机人李雷")
    assert "目的地：迪拜" in turn.reply
    assert task_of(turn)[1]["destination"] == "Dubai"  # stored as the user gave it


def test_a_validation_message_is_in_the_users_language(conv: Conversation) -> None:
    talk(conv, "我要退款")
    turn = talk(conv, "订单号是1234")
    assert not re.search(r"[A-Za-z]{4,}", turn.reply.replace("ORD-", "")), turn.reply


def test_a_failed_look_up_asks_again_in_the_users_language(conv: Conversation) -> None:
    turn = talk(conv, "我要退款，订单号ORD-77777，质量问题，退50")
    assert turn.state is not None and turn.state.task.status.is_open
    assert "ORD-77777" in turn.reply and "there is no order" not in turn.reply
    assert turn.state.task.stage == "collecting"
    fixed = talk(conv, "ORD-10002")
    assert task_of(fixed)[1]["order_number"] == "ORD-10002"


def test_chat_wraps_a_chinese_confirmation_at_any_width(tmp_path: Path) -> None:
    """A real ``relaystate chat`` process at narrow and wide terminals: every character of
    the reply is shown, in order (nothing cut off with an ellipsis)."""
    said = "帮我订12月9号北京到大阪的商务舱，乘机人刘洋\n"
    for width in (24, 40, 80, 160):
        env = {**os.environ, "COLUMNS": str(width), "RELAYSTATE_NOW": NOW, "TERM": "dumb"}
        done = subprocess.run(
            [
                *(sys.executable, "-m", "relaystate.cli", "chat", "--user", "alice"),
                *("--store", f"sqlite:///{tmp_path}/chat{width}.db"),
                *("--ledger", str(tmp_path / f"ledger{width}.db")),
            ],
            input=said,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        shown = re.sub(r"\s", "", done.stdout)
        wanted = (
            "请确认您的机票预订出发地北京目的地大阪日期2026年12月9日周三"
            "舱位商务舱乘机人刘洋对吗是否"
        )
        left = iter(shown)
        assert all(ch in left for ch in wanted), (width, done.stdout)
        assert "…" not in done.stdout


# -- dates, values, places -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3月5号买的", "2026-03-05"),
        ("去年双十一买的", "2025-11-11"),
        ("bought it last Christmas", "2025-12-25"),
        ("8/8/2025", "2025-08-08"),
        ("国庆节买的", "2026-10-01"),
        ("bought it 三个月前", "2026-08-29"),
        ("618那天买的", "2026-06-18"),
        ("去年的今天买的", "2025-11-29"),
        ("two weeks前买的", "2026-11-15"),
    ],
)
def test_a_purchase_date_reads_backwards_and_knows_holidays(
    conv: Conversation, text: str, value: str
) -> None:
    talk(conv, "my Pixel 8 won't charge")
    assert task_of(talk(conv, text))[1]["purchase_date"] == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("ecomony", "economy"),
        ("bussiness", "business"),
        ("商物舱", "business"),
        ("coach", "economy"),
    ],
)
def test_a_choice_typed_with_a_slip_or_a_synonym(conv: Conversation, text: str, value: str) -> None:
    talk(conv, "book a flight from Beijing to Paris on Dec 9")
    assert task_of(talk(conv, text))[1]["cabin_class"] == value


@pytest.mark.parametrize(
    ("text", "origin", "destination"),
    [
        ("PEK→NRT 12月3号", "北京", "东京"),
        ("fly from Xi'an to Chicago O'Hare", "Xi'an", "Chicago"),
        ("从上海虹桥出发去北京", "上海", "北京"),
        ("下礼拜一要去趟青岛，从北京走", "北京", "青岛"),
        ("flights from SFO to Seattle", "San Francisco", "Seattle"),
    ],
)
def test_places_come_from_the_gazetteer(
    conv: Conversation, text: str, origin: str, destination: str
) -> None:
    slots = task_of(talk(conv, text))[1]
    assert (slots.get("origin"), slots.get("destination")) == (origin, destination), slots


@pytest.mark.parametrize(
    ("text", "slots"),
    [
        ("退款，订单ORD-10002，原因是尺码不对", {"reason": "尺码不对"}),
        ("refund ORD 10001, the reason: it's too small", {"reason": "it's too small"}),
        ("ORD-10001全退，质量太差", {"order_number": "ORD-10001", "amount": 299}),
        ("need a refund on order #10003, like 1,000", {"order_number": "ORD-10003"}),
        ("订单号ORD-10002，手机壳发黄了，退二十五块五", {"amount": 25.5, "reason": "手机壳发黄了"}),
        ("ORD-10002那个退我三十", {"amount": 30}),
        ("refund ORD-10003, give me 500 back", {"amount": 500, "reason": None}),
        (
            "I'd like to return ORD-10001 - the left bud crackles - and get $75 back",
            {"reason": "the left bud crackles", "amount": 75},
        ),
    ],
)
def test_refund_values_stated_up_front(
    conv: Conversation, text: str, slots: dict[str, object]
) -> None:
    got = task_of(talk(conv, text))[1]
    assert {k: got.get(k) for k in slots} == slots, got


# -- questions about the Task at hand -----------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("why do you need that?", "reason"),
        ("一定要说原因吗？", "原因"),
        ("help", "reason"),
    ],
)
def test_a_question_is_answered_from_the_task_and_fills_nothing(
    conv: Conversation, question: str, wanted: str
) -> None:
    talk(conv, "我要退款，订单ORD-10001" if "原因" in wanted else "refund ORD-10001")
    turn = talk(conv, question)
    kind, slots = task_of(turn)
    assert kind == "refund" and "reason" not in slots
    assert wanted in turn.reply.lower()
    assert "I can help with" not in turn.reply


def test_what_was_my_destination_is_answered_from_state(conv: Conversation) -> None:
    talk(conv, "订一张去成都的机票")
    turn = talk(conv, "目的地是哪里来着")
    assert "成都" in turn.reply and task_of(turn)[1]["destination"] == "成都"


# -- cancelling ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "actually forget about it, i'll just drive",
        "唉，不弄了",
        "先别订了，取消吧",
        "nah forget it, cancel the flight",
    ],
)
def test_a_cancel_among_words_that_only_explain_cancels(conv: Conversation, text: str) -> None:
    talk(conv, "book a flight to Paris")
    turn = talk(conv, text)
    assert turn.state is not None and turn.state.task.status == TaskStatus.CANCELLED


def test_a_cancel_with_a_change_is_a_change(conv: Conversation) -> None:
    talk(conv, "book a flight from Beijing to Paris on Dec 9")
    turn = talk(conv, "cancel that, make it business")
    assert turn.state is not None and turn.state.task.status.is_open


def test_cancelling_a_task_that_is_not_open_never_cancels_another(conv: Conversation) -> None:
    talk(conv, "book a flight to Paris")
    turn = talk(conv, "no don't do it, cancel the refund")
    assert "no unfinished refund" in turn.reply
    assert open_types(conv) == ["flight_booking"]
    assert "没有未完成的退款" in talk(conv, "取消退款", session="s9").reply
