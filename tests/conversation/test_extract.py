"""Slot extraction from one utterance, in Chinese and English, for a flight and a refund."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaystate import Slot, Stage, TaskTemplate, TemplateError
from relaystate.conversation import Extraction, extract, extractor_of

from .support import TODAY, bare_flight, flight, refund

FLIGHT = flight()
REFUND = refund()
EXPECTABLE = [s.name for s in FLIGHT.slots] + [s.name for s in REFUND.slots]


def run(
    template: TaskTemplate, text: str, expecting: str | None = None, language: str | None = None
) -> Extraction:
    return extract(template, text, language=language, today=TODAY, expecting=expecting)


# (utterance, values) for the flight booking, nobody asked anything in particular.
FLIGHT_CASES: list[tuple[str, dict[str, Any]]] = [
    # places by cues
    ("from Beijing to Shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
    ("from beijing to shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
    ("Beijing to Shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
    ("从北京到上海", {"origin": "北京", "destination": "上海"}),
    ("北京到上海", {"origin": "北京", "destination": "上海"}),
    ("飞上海", {"destination": "上海"}),
    ("飞往东京", {"destination": "东京"}),
    ("去乌鲁木齐", {"destination": "乌鲁木齐"}),
    ("我要到上海", {"destination": "上海"}),
    ("我要去上海出差", {"destination": "上海"}),
    ("北京出发，去上海", {"origin": "北京", "destination": "上海"}),
    ("从北京坐飞机去上海", {"origin": "北京", "destination": "上海"}),
    # an airport's district is not a city: the city is what the booking needs
    ("从上海虹桥出发去北京大兴", {"origin": "上海", "destination": "北京"}),
    ("从上海虹桥机场出发去北京", {"origin": "上海虹桥机场", "destination": "北京"}),
    ("订张机票去成都出差，从北京走", {"origin": "北京", "destination": "成都"}),
    ("PEK→SHA tomorrow", {"origin": "Beijing", "destination": "Shanghai", "date": "2026-11-30"}),
    ("I need to fly from Xi'an to Chicago", {"origin": "Xi'an", "destination": "Chicago"}),
    ("from 北京 to 上海", {"origin": "北京", "destination": "上海"}),
    ("从Beijing到Shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
    ("I want to fly to Shanghai", {"destination": "Shanghai"}),
    ("I need a ticket from Beijing to Shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
    ("3 tickets to Paris", {"destination": "Paris"}),
    ("going to New York City", {"destination": "New York City"}),
    ("to Rio de Janeiro", {"destination": "Rio de Janeiro"}),
    ("leaving from São Paulo", {"origin": "São Paulo"}),
    # dates
    ("tomorrow", {"date": "2026-11-30"}),
    ("明天", {"date": "2026-11-30"}),
    ("下周三", {"date": "2026-12-02"}),
    ("next Wednesday", {"date": "2026-12-02"}),
    ("1月22日", {"date": "2027-01-22"}),
    ("Jan 22", {"date": "2027-01-22"}),
    ("in 3 days", {"date": "2026-12-02"}),
    ("3天后", {"date": "2026-12-02"}),
    # choices and synonyms
    ("business class", {"cabin_class": "business"}),
    ("Business", {"cabin_class": "business"}),
    ("ECONOMY please", {"cabin_class": "economy"}),
    ("first class", {"cabin_class": "first"}),
    ("biz", {"cabin_class": "business"}),
    ("coach is fine", {"cabin_class": "economy"}),
    ("商务舱", {"cabin_class": "business"}),
    ("头等舱，谢谢", {"cabin_class": "first"}),
    ("我要经济舱", {"cabin_class": "economy"}),
    # names
    ("my name is Li Lei", {"passenger_name": "Li Lei"}),
    ("My name's Alice Wang", {"passenger_name": "Alice Wang"}),
    ("passenger is Alice Wang", {"passenger_name": "Alice Wang"}),
    ("the passenger is John Smith.", {"passenger_name": "John Smith"}),
    ("name: Alice", {"passenger_name": "Alice"}),
    ("my name is José García", {"passenger_name": "José García"}),
    ("我叫李雷", {"passenger_name": "李雷"}),
    ("我的名字叫张伟。", {"passenger_name": "张伟"}),
    ("乘机人：王芳", {"passenger_name": "王芳"}),
    ("乘机人是欧阳娜娜", {"passenger_name": "欧阳娜娜"}),
    ("to Shanghai, passenger Li Lei", {"destination": "Shanghai", "passenger_name": "Li Lei"}),
    # everything at once
    (
        "I want to fly to Shanghai next Wednesday in business class",
        {"destination": "Shanghai", "date": "2026-12-02", "cabin_class": "business"},
    ),
    (
        "我想订一张下周三从北京到上海的商务舱机票",
        {"origin": "北京", "destination": "上海", "date": "2026-12-02", "cabin_class": "business"},
    ),
    (
        "明天从北京飞上海",
        {"origin": "北京", "destination": "上海", "date": "2026-11-30"},
    ),
    (
        "明天北京飞上海",
        {"origin": "北京", "destination": "上海", "date": "2026-11-30"},
    ),
    (
        "我叫李雷，明天从北京去上海，商务舱",
        {
            "origin": "北京",
            "destination": "上海",
            "date": "2026-11-30",
            "cabin_class": "business",
            "passenger_name": "李雷",
        },
    ),
    (
        "I'd like to book a flight from San Francisco to New York City on Friday, first class",
        {
            "origin": "San Francisco",
            "destination": "New York City",
            "date": "2026-12-04",
            "cabin_class": "first",
        },
    ),
    (
        "Hi, I'd like to book a business class flight from London to Paris for tomorrow "
        "morning. The passenger is John Smith.",
        {
            "origin": "London",
            "destination": "Paris",
            "date": "2026-11-30",
            "cabin_class": "business",
            "passenger_name": "John Smith",
        },
    ),
    ("I'm going to New York on Jan 22", {"destination": "New York", "date": "2027-01-22"}),
    ("tomorrow economy", {"date": "2026-11-30", "cabin_class": "economy"}),
    ("明天经济舱", {"date": "2026-11-30", "cabin_class": "economy"}),
    ("下周三下午三点从上海出发", {"origin": "上海", "date": "2026-12-02"}),
    # full-width input
    ("从北京到上海，１月２２日", {"origin": "北京", "destination": "上海", "date": "2027-01-22"}),
]


@pytest.mark.parametrize(("text", "values"), FLIGHT_CASES)
def test_flight_utterances(text: str, values: dict[str, Any]) -> None:
    result = run(FLIGHT, text)
    assert result.values == values
    assert result.errors == {}


# Nothing in these belongs to a flight booking slot, or the words only look like values.
FLIGHT_NOTHING = [
    "hello",
    "ok",
    "yes",
    "取消",
    "what's the weather in Shanghai?",
    "what's the weather tomorrow?",
    "明天上海天气怎么样？",
    "退款ORD-12345，金额300元",
    "I want a refund for order ORD-12345, it cost $30",
    "我收到上海的包裹了",
    "First, I need to check",
    "to the airport",
    "I want to go",
    "I'd like to change something",
    "我是李雷",
    "Book a flight for me",
]


@pytest.mark.parametrize("text", FLIGHT_NOTHING)
def test_flight_false_positives(text: str) -> None:
    result = run(FLIGHT, text)
    assert result.values == {} and result.errors == {}


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("business trip to Shanghai", {"destination": "Shanghai"}),
        ("Book a flight for Li Lei to Tokyo", {"destination": "Tokyo", "passenger_name": "Li Lei"}),
        ("I don't want economy, business please", {"cabin_class": "business"}),
        ("改到上海", {"destination": "上海"}),
        ("我从上海来", {"origin": "上海"}),
        ("我要从广州回北京", {"origin": "广州"}),
        ("改签到周五", {"date": "2026-12-04"}),
        ("to LA", {"destination": "Los Angeles"}),
        (
            "Hi, I'm Li Lei, flying to Shanghai",
            {"destination": "Shanghai", "passenger_name": "Li Lei"},
        ),
        ("I'm tired of waiting", {}),
        ("I'm going first class", {"cabin_class": "first"}),
        ("不要头等舱", {}),
        ("not first class", {}),
        ("从北京到上海的航班有哪些？", {"origin": "北京", "destination": "上海"}),
    ],
)
def test_flight_close_calls(text: str, values: dict[str, Any]) -> None:
    assert run(FLIGHT, text).values == values


# (utterance, values) that correct an earlier answer.
CORRECTIONS: list[tuple[str, dict[str, Any]]] = [
    ("actually make it business class", {"cabin_class": "business"}),
    ("make it first", {"cabin_class": "first"}),
    ("economy instead", {"cabin_class": "economy"}),
    ("改成商务舱", {"cabin_class": "business"}),
    ("换成头等舱吧", {"cabin_class": "first"}),
    ("不是经济舱，是商务舱", {"cabin_class": "business"}),
    ("不是经济舱是商务舱", {"cabin_class": "business"}),
    ("not economy, business", {"cabin_class": "business"}),
    ("change the destination to Guangzhou", {"destination": "Guangzhou"}),
    ("把目的地改成广州", {"destination": "广州"}),
    ("actually, from Tianjin", {"origin": "Tianjin"}),
    ("不对，从天津出发", {"origin": "天津"}),
    ("not from Beijing, from Tianjin", {"origin": "Tianjin"}),
    ("change the date to next Friday", {"date": "2026-12-04"}),
    ("日期改成下周五", {"date": "2026-12-04"}),
    ("actually, Jan 25 instead", {"date": "2027-01-25"}),
    ("不是明天，是后天", {"date": "2026-12-01"}),
    ("not tomorrow, Friday", {"date": "2026-12-04"}),
    ("改到大后天", {"date": "2026-12-02"}),
    ("change the name to Wang Fang", {"passenger_name": "Wang Fang"}),
    ("乘机人改成王芳", {"passenger_name": "王芳"}),
    ("no, to Shenzhen", {"destination": "Shenzhen"}),
]


@pytest.mark.parametrize(("text", "values"), CORRECTIONS)
def test_corrections_replace_values(text: str, values: dict[str, Any]) -> None:
    result = run(FLIGHT, text)
    assert result.values == values
    assert result.correction


def test_plain_answers_are_not_corrections() -> None:
    for text in ("business class", "从北京到上海", "明天", "我叫李雷"):
        assert not run(FLIGHT, text).correction


# (utterance, the slot just asked for, values)
ANSWERS: list[tuple[str, str, dict[str, Any]]] = [
    ("上海", "destination", {"destination": "上海"}),
    ("上海。", "destination", {"destination": "上海"}),
    ("是上海", "destination", {"destination": "上海"}),
    ("嗯，上海吧", "destination", {"destination": "上海"}),
    ("Shanghai", "destination", {"destination": "Shanghai"}),
    ("it's Shanghai", "destination", {"destination": "Shanghai"}),
    ("Shanghai please", "destination", {"destination": "Shanghai"}),
    ("new york", "destination", {"destination": "New York"}),
    ("北京", "origin", {"origin": "北京"}),
    ("from Beijing", "destination", {"origin": "Beijing"}),
    ("Li Lei", "passenger_name", {"passenger_name": "Li Lei"}),
    ("李雷", "passenger_name", {"passenger_name": "李雷"}),
    ("是李雷", "passenger_name", {"passenger_name": "李雷"}),
    ("我是李雷", "passenger_name", {"passenger_name": "李雷"}),
    ("李雷先生", "passenger_name", {"passenger_name": "李雷"}),
    ("I'm Alice Wang", "passenger_name", {"passenger_name": "Alice Wang"}),
    ("商务", "cabin_class", {"cabin_class": "business"}),
    ("busi", "cabin_class", {"cabin_class": "business"}),
    ("头等", "cabin_class", {"cabin_class": "first"}),
    ("the first one... I mean first class", "cabin_class", {"cabin_class": "first"}),
    ("22号", "date", {"date": "2026-12-22"}),
    ("明天可以吗？", "date", {"date": "2026-11-30"}),
    ("no, Shanghai", "destination", {"destination": "Shanghai"}),
    ("不是北京是上海", "destination", {"destination": "上海"}),
    ("not Beijing, Shanghai", "destination", {"destination": "Shanghai"}),
    (
        "Shanghai, business class, tomorrow",
        "destination",
        {"destination": "Shanghai", "date": "2026-11-30", "cabin_class": "business"},
    ),
    (
        "business class, Shanghai",
        "destination",
        {"destination": "Shanghai", "cabin_class": "business"},
    ),
    ("上海，明天", "destination", {"destination": "上海", "date": "2026-11-30"}),
    # Answers that say nothing about the slot asked for.
    ("tomorrow", "origin", {"date": "2026-11-30"}),
    ("明天", "passenger_name", {"date": "2026-11-30"}),
    ("business", "passenger_name", {"cabin_class": "business"}),
    ("ok", "origin", {}),
    ("yes", "passenger_name", {}),
    ("取消", "origin", {}),
    ("等一下", "destination", {}),
    ("what's the weather tomorrow?", "origin", {}),
    ("Shanghai?", "destination", {}),
]


@pytest.mark.parametrize(("text", "expecting", "values"), ANSWERS)
def test_answers_to_the_question_asked(text: str, expecting: str, values: dict[str, Any]) -> None:
    result = run(FLIGHT, text, expecting=expecting)
    assert result.values == values
    assert result.errors == {}


# (utterance, slot asked for or None, slot with an error, part of the reason)
INVALID: list[tuple[str, str | None, str, str]] = [
    ("2月30日", None, "date", "not a valid date"),
    ("Feb 30", "date", "date", "not a valid date"),
    ("yesterday", None, "date", "already passed"),
    ("上周五", "date", "date", "already passed"),
    ("someday", "date", "date", "not a date I understand"),
    ("the cheapest one", "cabin_class", "cabin_class", "not one of economy, business, first"),
    ("豪华舱", "cabin_class", "cabin_class", "not one of"),
    ("I don't know yet", "destination", "destination", "does not look like a place"),
    ("12345", "origin", "origin", "does not look like a place"),
    ("我不知道", "destination", "destination", "does not look like a place"),
    ("no idea, you pick", "passenger_name", "passenger_name", "does not look like a name"),
    ("随便", "destination", "destination", "does not look like a place"),
    ("R2-D2", "passenger_name", "passenger_name", "does not look like a name"),
]


@pytest.mark.parametrize(("text", "expecting", "slot", "reason"), INVALID)
def test_invalid_values_give_a_reason(
    text: str, expecting: str | None, slot: str, reason: str
) -> None:
    result = run(FLIGHT, text, expecting=expecting)
    assert slot not in result.values
    assert reason in result.errors[slot]


@pytest.mark.parametrize(
    ("text", "slot", "shown"),
    [
        ("economy or business?", "cabin_class", "economy, business"),
        ("经济舱还是商务舱", "cabin_class", "economy, business"),
        ("I usually fly economy but this time business", "cabin_class", "economy, business"),
        ("from Jan 22 to Jan 25", "date", "2027-01-22, 2027-01-25"),
        ("明天或者后天", "date", "2026-11-30, 2026-12-01"),
    ],
)
def test_two_different_values_for_one_slot_ask_which(text: str, slot: str, shown: str) -> None:
    result = run(FLIGHT, text)
    assert slot not in result.values
    assert result.errors[slot] == f"more than one value given ({shown}); which one?"
    # As a correction the last one is meant.
    assert slot in run(FLIGHT, "actually " + text.rstrip("?")).values


def test_a_valid_value_wins_over_an_error_for_the_same_slot() -> None:
    result = run(FLIGHT, "not 2月30日, 3月1日")
    assert result.values == {"date": "2027-03-01"} and result.errors == {}


# --- refund ----------------------------------------------------------------------------------

REFUND_CASES: list[tuple[str, str | None, dict[str, Any]]] = [
    (
        "我要退款，订单号ORD-12345，因为东西坏了，退300元",
        None,
        {"order_number": "ORD-12345", "reason": "东西坏了", "amount": 300},
    ),
    (
        "refund ORD-12345 because it arrived broken, $30.50",
        None,
        {"order_number": "ORD-12345", "reason": "it arrived broken", "amount": 30.5},
    ),
    ("order ord-12345", None, {"order_number": "ORD-12345"}),
    ("订单ＯＲＤ－１２３４５", None, {"order_number": "ORD-12345"}),
    ("my order is ORD-00042, thanks", None, {"order_number": "ORD-00042"}),
    ("ORD-123456", None, {}),
    ("XORD-12345", None, {}),
    ("I paid 30 dollars", None, {"amount": 30}),
    ("300元", None, {"amount": 300}),
    ("¥300", None, {"amount": 300}),
    ("￥1,200", None, {"amount": 1200}),
    ("$30.50", None, {"amount": 30.5}),
    ("30 dollars", None, {"amount": 30}),
    ("RMB 88", None, {"amount": 88}),
    ("退两百五十块", None, {"amount": 250}),
    ("三百元", None, {"amount": 300}),
    ("三百五十块钱", None, {"amount": 350}),
    ("1.5万元", None, {"amount": 15000}),
    ("the amount is 300", None, {"amount": 300}),
    ("金额：300", None, {"amount": 300}),
    ("refund me thirty dollars please", None, {"amount": 30}),
    ("1月22日买的，退300", None, {"amount": 300}),
    ("ORD-12345 on Jan 22", None, {"order_number": "ORD-12345"}),
    ("the reason is it arrived late", None, {"reason": "it arrived late"}),
    ("原因是尺码不对。", None, {"reason": "尺码不对"}),
    ("ORD-12345", "order_number", {"order_number": "ORD-12345"}),
    ("it's ORD-12345", "order_number", {"order_number": "ORD-12345"}),
    ("300", "amount", {"amount": 300}),
    ("三百", "amount", {"amount": 300}),
    ("两百五", "amount", {"amount": 250}),
    ("about 45.5", "amount", {"amount": 45.5}),
    ("it broke", "reason", {"reason": "it broke"}),
    ("东西坏了，屏幕碎了", "reason", {"reason": "东西坏了，屏幕碎了"}),
    (
        "The screen cracked after a day. Please help.",
        "reason",
        {"reason": "The screen cracked after a day. Please help"},
    ),
    ("tomorrow", "reason", {}),
    ("ORD-12345", "reason", {"order_number": "ORD-12345"}),
    ("actually it's ORD-54321", None, {"order_number": "ORD-54321"}),
    ("not ORD-12345, ORD-54321", None, {"order_number": "ORD-54321"}),
    ("改成200元", None, {"amount": 200}),
    ("I want a refund for my order, it broke", None, {}),
    ("my order is late", None, {}),
    ("order 12:30", None, {}),
    # Nothing of a flight belongs to a refund.
    ("from Beijing to Shanghai tomorrow business class", None, {}),
    ("明天从北京飞上海", None, {}),
]


@pytest.mark.parametrize(("text", "expecting", "values"), REFUND_CASES)
def test_refund_utterances(text: str, expecting: str | None, values: dict[str, Any]) -> None:
    result = run(REFUND, text, expecting=expecting)
    assert result.values == values
    assert result.errors == {}


@pytest.mark.parametrize(
    ("text", "expecting", "slot", "reason"),
    [
        ("1234", "order_number", "order_number", "does not match the expected form"),
        ("order 1234", None, "order_number", "does not match the expected form"),
        ("ABC-12345", "order_number", "order_number", "does not match the expected form"),
        ("ORD-12345 or ORD-54321?", None, "order_number", "more than one value"),
        ("ORD-1234", "order_number", "order_number", "does not match the expected form"),
        ("0", "amount", "amount", "more than zero"),
        ("-5", "amount", "amount", "more than zero"),
        ("退0元", None, "amount", "more than zero"),
        ("lots", "amount", "amount", "is not a number"),
        ("不知道", "amount", "amount", "is not a number"),
        # no amount: NaN and infinity are words, and 400 digits would be inf
        ("inf", "amount", "amount", "is not a number"),
        ("nan", "amount", "amount", "is not a number"),
        ("9" * 400, "amount", "amount", "is not a number"),
        ("1e400", "amount", "amount", "is not a number"),
    ],
)
def test_refund_invalid_values(text: str, expecting: str | None, slot: str, reason: str) -> None:
    result = run(REFUND, text, expecting=expecting)
    assert slot not in result.values
    assert reason in result.errors[slot]


@pytest.mark.parametrize(
    ("text", "expecting"),
    [
        ("order #10003, like 1,000", None),
        ("我要退款，订单号是10003", None),
        ("order number is 10003", None),
        ("10003", "order_number"),
    ],
)
def test_the_digits_of_an_identifier_whose_letters_go_without_saying(
    text: str, expecting: str | None
) -> None:
    assert run(REFUND, text, expecting=expecting).values["order_number"] == "ORD-10003"


def test_digits_that_are_not_after_an_order_cue_are_no_order_number() -> None:
    assert "order_number" not in run(REFUND, "I bought 10003 stickers").values


@pytest.mark.parametrize(
    "text",
    [
        "refund ORD-10001 amount " + "9" * 400,
        "退款ORD-10001，退" + "9" * 30 + "元",
        "refund ORD-10001 $" + "9" * 20,
    ],
)
def test_a_number_no_amount_can_be_is_not_read(text: str) -> None:
    """Beyond 2**53 - 1 a float no longer keeps the number: it is no amount, never inf."""
    result = run(REFUND, text)
    assert result.values == {"order_number": "ORD-10001"}


def test_the_largest_exact_amount_is_read() -> None:
    assert run(REFUND, "9007199254740991", expecting="amount").values == {
        "amount": 9007199254740991
    }


def test_a_date_is_never_an_amount() -> None:
    for text in ("1月22日", "Jan 22", "2027-01-22", "3天后", "in 3 days", "22号"):
        assert run(REFUND, text, expecting="amount").values == {}


# --- templates without extractors or cues -----------------------------------------------------


def test_extractors_are_guessed_from_slot_names() -> None:
    kinds = {s.name: extractor_of(s) for s in bare_flight().slots}
    assert kinds == {
        "origin": "place",
        "destination": "place",
        "date": "date",
        "cabin_class": "choice",
        "passenger_name": "person",
    }
    assert extractor_of(Slot("order_id")) == "order_id"
    assert extractor_of(Slot("order_number", pattern=r"ORD-\d{5}")) == "text"
    assert extractor_of(Slot("amount", kind="number")) == "amount"
    assert extractor_of(Slot("reason")) == "text"
    assert extractor_of(Slot("city", extractor="text")) == "text"


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (
            "book a flight from Beijing to Shanghai next Friday, business class, passenger Li Lei",
            {
                "origin": "Beijing",
                "destination": "Shanghai",
                "date": "2026-12-04",
                "cabin_class": "business",
                "passenger_name": "Li Lei",
            },
        ),
        (
            "我想订明天从北京到上海的商务舱，乘机人李雷",
            {
                "origin": "北京",
                "destination": "上海",
                "date": "2026-11-30",
                "cabin_class": "business",
                "passenger_name": "李雷",
            },
        ),
        ("I'm flying out of Boston", {"origin": "Boston"}),
        ("Beijing to Shanghai", {"origin": "Beijing", "destination": "Shanghai"}),
        ("北京飞上海", {"origin": "北京", "destination": "上海"}),
    ],
)
def test_default_cues_for_templates_that_declare_none(text: str, values: dict[str, Any]) -> None:
    assert run(bare_flight(), text).values == values


def test_order_numbers_without_a_pattern() -> None:
    template = TaskTemplate(
        "lookup",
        slots=[Slot("order_id"), Slot("qty", kind="number", extractor="number")],
        stages=[Stage("s")],
    )
    assert run(template, "order A1B2C3").values == {"order_id": "A1B2C3"}
    assert run(template, "订单号 7788").values == {"order_id": "7788"}
    assert run(template, "A1B2C3", expecting="order_id").values == {"order_id": "A1B2C3"}
    assert "order number" in run(template, "hmm dunno", expecting="order_id").errors["order_id"]
    assert run(template, "两张", expecting="qty").values == {"qty": 2}
    assert run(template, "$5", expecting=None).values == {}


def test_two_date_slots_take_dates_by_cue_then_in_order() -> None:
    template = TaskTemplate(
        "trip",
        slots=[
            Slot("depart", kind="date", cues={"en": ["leaving", "depart"], "zh": ["出发"]}),
            Slot("back", kind="date", cues={"en": ["back", "returning"], "zh": ["回来", "返回"]}),
        ],
        stages=[Stage("s")],
    )
    assert run(template, "returning Jan 25, leaving Jan 22").values == {
        "depart": "2027-01-22",
        "back": "2027-01-25",
    }
    assert run(template, "Jan 22 to Jan 25").values == {
        "depart": "2027-01-22",
        "back": "2027-01-25",
    }
    assert run(template, "出发1月22日，返回1月25日").values == {
        "depart": "2027-01-22",
        "back": "2027-01-25",
    }


def test_a_single_cue_may_be_a_string() -> None:
    template = TaskTemplate(
        "t",
        slots=[Slot("city", extractor="place", cues={"en": "in", "zh": "在"})],
        stages=[Stage("s")],
    )
    assert run(template, "weather in Paris").values == {"city": "Paris"}
    assert run(template, "在北京").values == {"city": "北京"}


def test_unknown_extractor_is_a_template_error_when_declared() -> None:
    with pytest.raises(TemplateError, match="extractor must be one of"):
        TaskTemplate("t", slots=[Slot("x", extractor="colour")], stages=[Stage("s")])


def test_new_slot_fields_leave_validation_alone() -> None:
    slot = Slot("origin", extractor="place", cues={"en": ["from"]})
    assert slot.validate(" Beijing ") == "Beijing"
    assert Slot("origin").extractor is None and Slot("origin").cues == {}


def test_language_hint_does_not_change_the_reading() -> None:
    for text in ("从北京到上海", "from Beijing to Shanghai"):
        assert run(FLIGHT, text, language="en").values == run(FLIGHT, text, language="zh").values


def test_extraction_is_deterministic() -> None:
    text = "我叫李雷，明天从北京去上海，商务舱"
    assert all(run(FLIGHT, text) == run(FLIGHT, text) for _ in range(5))


WORDS = [
    "from",
    "to",
    "Beijing",
    "上海",
    "从",
    "到",
    "去",
    "飞",
    "明天",
    "tomorrow",
    "next",
    "Friday",
    "下周三",
    "1月22日",
    "Jan",
    "22",
    "商务舱",
    "business",
    "first",
    "class",
    "my name is",
    "我叫",
    "李雷",
    "Li",
    "Lei",
    "not",
    "不是",
    "是",
    "改成",
    "actually",
    "ORD-12345",
    "300元",
    "$30.50",
    "三百",
    "because",
    "因为",
    "坏了",
    ",",
    "，",
    "。",
    "?",
    "吗",
    " ",
    "-",
    ":",
    "号",
    "天后",
]


@given(st.lists(st.sampled_from(WORDS), max_size=14), st.sampled_from([None, *EXPECTABLE]))
@settings(max_examples=300, deadline=None)
def test_any_mix_of_words_reads_without_raising(words: list[str], expecting: str | None) -> None:
    text = "".join(words)
    for template in (FLIGHT, REFUND):
        target = expecting if expecting in {s.name for s in template.slots} else None
        result = run(template, text, expecting=target)
        for name, value in result.values.items():
            assert template.slot(name).validate(value) == value
            assert name not in result.errors
        assert result == run(template, text, expecting=target)


@pytest.mark.parametrize(
    ("text", "expecting", "value"),
    [
        ("bussiness", "cabin_class", "business"),
        ("I need a buisness class flight", None, "business"),
        ("frist class please", None, "first"),
        ("econmy", "cabin_class", "economy"),
        ("商物舱", "cabin_class", "business"),
        ("头等仓", None, "first"),
    ],
)
def test_choices_typed_with_a_slip(text: str, expecting: str | None, value: str) -> None:
    from relaystate.demo import flight_booking
    from relaystate.demo.ledger import Ledger

    template = flight_booking(Ledger(":memory:"))
    found = run(template, text, expecting=expecting)
    assert found.values.get("cabin_class") == value, found


def test_a_slip_is_no_match_when_two_choices_are_as_close() -> None:
    from relaystate import Slot, Stage, TaskTemplate

    template = TaskTemplate(
        "t", slots=[Slot("size", choices=["large", "barge"])], stages=[Stage("s")]
    )
    assert "size" not in run(template, "xarge please", expecting="size").values
