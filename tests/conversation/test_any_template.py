"""Understanding for templates declared here, not for the demo agents: one test per class of
failure of issue 19, in Chinese and in English. The templates are declared plainly, as a new
user would (a kind, a label, a question, a few triggers; no cue lists), so what passes here
is what any user's template gets for free."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from relaystate import Runtime, Scope, Slot, Stage, TaskTemplate, open_store
from relaystate.conversation import Conversation, Turn, extract
from relaystate.errors import TemplateError

TODAY = date(2026, 12, 3)  # a Thursday
NOW = "2026-12-03T09:00:00"
ALICE = Scope.user("alice")


def _flow() -> list[Stage]:
    from relaystate import all_required_slots, user_confirmed

    return [
        Stage("collecting", exit=all_required_slots),
        Stage("confirming", exit=user_confirmed),
        Stage("done"),
    ]


def stay() -> TaskTemplate:
    return TaskTemplate(
        "room_stay",
        titles={"en": "room stay", "zh": "住宿预订"},
        triggers={"en": ["hotel", "a room"], "zh": ["酒店", "订房"]},
        slots=[
            Slot("city", kind="place", ask={"en": "Which city?", "zh": "哪个城市？"}),
            Slot("check_in", kind="date", labels={"zh": "入住日期"}),
            Slot("nights", kind="count", maximum=30, labels={"zh": "晚数"}),
            Slot("guests", kind="count", maximum=8, labels={"zh": "人数"}),
            Slot("guest_name", kind="person", labels={"zh": "入住人"}),
        ],
        stages=_flow(),
    )


def table() -> TaskTemplate:
    return TaskTemplate(
        "table_booking",
        titles={"en": "table booking", "zh": "订座"},
        triggers={"en": ["a table", "restaurant"], "zh": ["订座", "定个桌", "订桌", "餐厅"]},
        slots=[
            Slot("day", kind="date", labels={"zh": "日期"}),
            Slot("at", kind="time", labels={"en": "time", "zh": "时间"}),
            Slot("party_size", kind="count", maximum=20, labels={"zh": "人数"}),
            Slot("contact_phone", kind="phone", labels={"zh": "电话"}),
            Slot("booking_name", kind="person", labels={"zh": "姓名"}),
        ],
        stages=_flow(),
    )


def claim() -> TaskTemplate:
    return TaskTemplate(
        "damage_claim",
        titles={"en": "damage claim", "zh": "理赔"},
        triggers={"en": ["insurance claim", "file a claim"], "zh": ["理赔", "报案"]},
        opening_slot="what_happened",
        slots=[
            Slot("what_happened", labels={"zh": "经过"}, ask={"en": "What happened?"}),
            Slot("when", kind="date", direction="past", labels={"en": "date", "zh": "日期"}),
            Slot("claimed", kind="number", labels={"en": "amount", "zh": "金额"}),
            Slot(
                "severity",
                choices=["low", "high"],
                synonyms={"minor": "low", "轻微": "low", "紧急": "high", "urgent": "high"},
                labels={"zh": "严重程度"},
            ),
            Slot("email", kind="email", required=False),
        ],
        stages=_flow(),
    )


def trip() -> TaskTemplate:
    return TaskTemplate(
        "train_trip",
        titles={"en": "train ticket", "zh": "火车票"},
        triggers={"en": ["train ticket", "a train"], "zh": ["火车票", "高铁"]},
        slots=[
            Slot("origin", kind="place", labels={"zh": "出发地"}),
            Slot("destination", kind="place", labels={"zh": "目的地"}),
            Slot("travel_date", kind="date", labels={"zh": "日期"}),
            Slot(
                "seat",
                choices=["second", "first", "business"],
                synonyms={"二等座": "second", "一等座": "first", "商务座": "business"},
            ),
        ],
        stages=_flow(),
    )


def read(template: TaskTemplate, text: str, **kw: Any) -> dict[str, Any]:
    return extract(template, text, today=TODAY, **kw).values


def problems(template: TaskTemplate, text: str, **kw: Any) -> dict[str, str]:
    return {k: str(v) for k, v in extract(template, text, today=TODAY, **kw).errors.items()}


# -- 1. a number said up front fills a count slot ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "nights", "guests"),
    [
        ("a hotel in London for 3 nights from December 10, 2 guests", 3, 2),
        ("订酒店，伦敦，12月10号入住，住三晚，两个人", 3, 2),
        ("a room for me and my wife, 4 nights", 4, 2),
        ("一家三口，住两晚", 2, 3),
    ],
)
def test_counts_said_up_front(text: str, nights: int, guests: int) -> None:
    values = read(stay(), text, opening=True)
    assert (values.get("nights"), values.get("guests")) == (nights, guests)


@pytest.mark.parametrize(
    ("text", "expecting", "slot", "value"),
    [
        ("改成住两晚", "guest_name", "nights", 2),
        ("make it 8 people", "guest_name", "guests", 8),
    ],
)
def test_a_count_while_another_slot_is_asked(
    text: str, expecting: str, slot: str, value: int
) -> None:
    found = extract(stay(), text, today=TODAY, expecting=expecting)
    assert found.values == {slot: value}
    assert expecting not in found.errors


@pytest.mark.parametrize("text", ["50 guests", "五十个人"])
def test_a_count_past_its_maximum_is_refused_with_the_limit(text: str) -> None:
    assert "8" in problems(stay(), text, expecting="guests")["guests"]


# -- 2. a time of day -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("定个桌，十个人，7点，包间", "19:00"),
        ("a table for 4 at 7:45", "19:45"),
        ("晚上七点半", "19:30"),
        ("at 7pm", "19:00"),
        ("中午12点", "12:00"),
    ],
)
def test_a_time_of_day(text: str, at: str) -> None:
    assert read(table(), text, opening=True).get("at") == at


def test_a_part_of_day_after_a_date_keeps_the_date_and_sets_the_time() -> None:
    values = read(table(), "后天下午3点，两位", opening=True)
    assert (values["day"], values["at"], values["party_size"]) == ("2026-12-05", "15:00", 2)


# -- 3. phone numbers and emails wherever they are said ---------------------------------------


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        ("电话138-0013-8000，姓王", "+8613800138000"),
        ("call me on (415) 555-0132", "+14155550132"),
    ],
)
def test_a_phone_number_inside_a_sentence_is_normalised(text: str, phone: str) -> None:
    assert read(table(), text).get("contact_phone") == phone


def test_an_email_is_read_and_a_bad_one_refused() -> None:
    assert read(claim(), "my email is li.ting@example.com")["email"] == "li.ting@example.com"
    assert "email" in problems(claim(), "li.ting@example", expecting="email")


# -- 4. places without a cue word, nicknames, provinces, typos --------------------------------


@pytest.mark.parametrize(
    ("text", "city"),
    [
        ("我要定酒店，广州，明天入住", "广州"),
        ("a hotel in the Windy City", "Chicago"),
        ("a room in san fransisco", "San Francisco"),
    ],
)
def test_a_city_named_anywhere(text: str, city: str) -> None:
    assert read(stay(), text, opening=True).get("city") == city


@pytest.mark.parametrize(
    ("text", "origin", "destination"),
    [
        ("the Big Apple to Sin City", "New York City", "Las Vegas"),
        ("从广东深圳到云南昆明", "深圳", "昆明"),
        ("from Canton to Bombay", "Guangzhou", "Mumbai"),
        ("回趟家看爸妈，从魔都回蓉城", "上海", "成都"),
    ],
)
def test_nicknames_provinces_and_context_words(text: str, origin: str, destination: str) -> None:
    values = read(trip(), text)
    assert (values.get("origin"), values.get("destination")) == (origin, destination)


# -- 5. names in free phrasing ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("名字写李婷", "李婷"),
        ("入住人叫刘洋", "刘洋"),
        ("a table under Garcia", "Garcia"),
        ("王先生，两位", "王先生"),
    ],
)
def test_a_name_in_free_phrasing(text: str, name: str) -> None:
    template = table() if "table" in text or "两位" in text else stay()
    field = "booking_name" if template.type == "table_booking" else "guest_name"
    assert read(template, text).get(field) == name


def test_a_name_slot_refuses_a_number_with_a_question_back() -> None:
    found = extract(table(), "8", today=TODAY, expecting="booking_name")
    assert "booking_name" not in found.values


# -- 6. free text from the describing words ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I'd like to file a claim: my laptop was stolen from the car",
        "我要理赔，笔记本电脑在车里被偷了",
    ],
)
def test_the_opening_slot_keeps_what_describes(text: str) -> None:
    told = read(claim(), text, opening=True)["what_happened"]
    assert "stolen" in told or "被偷" in told
    assert "claim" not in told and "理赔" not in told


def test_a_bare_request_fills_no_free_text_slot() -> None:
    assert "what_happened" not in read(claim(), "I'd like to file a claim", opening=True)


@pytest.mark.parametrize(
    ("held", "text", "new"),
    [
        ("屏幕闪烁", "不是屏幕闪烁，是屏幕上有个亮点", "屏幕上有个亮点"),
        ("flickering", "it's not flickering, it's a dead pixel", "a dead pixel"),
    ],
)
def test_a_description_corrected(held: str, text: str, new: str) -> None:
    values = read(claim(), text, held={"what_happened": held}, expecting="when")
    assert values == {"what_happened": new}


# -- 7. corrections to a slot other than the one asked ----------------------------------------


@pytest.mark.parametrize(
    ("text", "held", "slot", "value"),
    [
        (
            "make that Boston instead of Chicago",
            {"destination": "Chicago"},
            "destination",
            "Boston",
        ),
        ("不是苏州，是杭州", {"origin": "上海", "destination": "苏州"}, "destination", "杭州"),
        ("change Newark to Boston", {"origin": "Newark"}, "origin", "Boston"),
    ],
)
def test_a_held_value_named_as_the_old_one_is_replaced(
    text: str, held: dict[str, str], slot: str, value: str
) -> None:
    assert read(trip(), text, held=held, expecting="travel_date") == {slot: value}


@pytest.mark.parametrize(
    ("text", "value"), [("全退……算了只退200吧", 200), ("500, never mind, 300", 300)]
)
def test_a_changed_mind_takes_the_last_value(text: str, value: int) -> None:
    assert read(claim(), text, expecting="claimed") == {"claimed": value}


# -- 8. dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("除夕", "2027-02-05"),
        ("24/12", "2026-12-24"),
        ("月底", "2026-12-31"),
        ("the end of next month", "2027-01-31"),
        ("a week from tomorrow", "2026-12-11"),
        ("the last Friday of the month", "2026-12-25"),
        ("下周三", "2026-12-09"),
    ],
)
def test_dates_people_say(text: str, day: str) -> None:
    assert read(trip(), text, expecting="travel_date") == {"travel_date": day}


@pytest.mark.parametrize(
    ("text", "day"), [("it happened this Monday", "2026-11-30"), ("上周五出的事", "2026-11-27")]
)
def test_a_past_date_slot_reads_backwards(text: str, day: str) -> None:
    assert read(claim(), text, expecting="when")["when"] == day


def test_a_holiday_in_a_description_does_not_overwrite_the_date() -> None:
    values = read(claim(), "it was a Christmas present", held={"when": "2026-11-30"})
    assert "when" not in values


# -- 9. amounts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("forty-five dollars and fifty cents", 45.5),
        ("$45 and 50 cents", 45.5),
        ("壹仟贰佰玖拾玖元", 1299),
        ("两千五", 2500),
    ],
)
def test_amounts_people_say(text: str, amount: float) -> None:
    assert read(claim(), text, expecting="claimed") == {"claimed": amount}


@pytest.mark.parametrize("text", ["一两百", "百八十块", "退一半"])
def test_a_rough_amount_gives_no_number(text: str) -> None:
    assert "claimed" not in read(claim(), text, expecting="claimed")


def test_a_negated_amount_is_not_the_amount() -> None:
    assert "claimed" not in read(claim(), "the laptop broke, except the $99 fee", opening=True)


# -- 10. routing a new template gets for free -------------------------------------------------


@pytest.fixture
def conv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Conversation]:
    monkeypatch.setenv("RELAYSTATE_NOW", NOW)
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/any.db"), [stay(), table(), claim(), trip()])
    yield Conversation(rt)
    rt.close()


def say(conv: Conversation, *texts: str, session: str = "s1") -> Turn:
    turn = None
    for text in texts:
        turn = conv.handle(ALICE, text, session)
    assert turn is not None
    return turn


def test_values_without_the_trigger_route_by_their_kinds(conv: Conversation) -> None:
    turn = say(conv, "定个桌，后天晚上7点，3位")
    assert turn.state is not None and turn.state.task.type == "table_booking"
    assert turn.state.task.slots["party_size"] == 3


def test_a_clearly_new_request_starts_its_task_without_a_question(conv: Conversation) -> None:
    say(conv, "a table for 2 tomorrow at 8pm")
    turn = say(conv, "and a hotel in Boston for tonight")
    assert turn.state is not None and turn.state.task.type == "room_stay"
    assert turn.state.task.slots["city"] == "Boston"


def test_a_stray_value_never_starts_a_task(conv: Conversation) -> None:
    turn = say(conv, "3")
    assert turn.state is None
    assert conv.runtime.open_tasks(ALICE) == []


def test_an_answer_in_a_new_session_goes_to_the_waiting_task(conv: Conversation) -> None:
    first = say(conv, "I need a train ticket from Boston to New York")
    assert first.state is not None
    turn = say(conv, "next Friday", session="s2")
    assert turn.state is not None and turn.state.task.id == first.state.task.id
    assert turn.state.task.slots["travel_date"] == "2026-12-11"


@pytest.mark.parametrize("again", ["I need a train ticket from Boston to New York", "train ticket"])
def test_the_same_request_in_a_new_session_resumes_the_open_task_with_no_error(
    conv: Conversation, again: str
) -> None:
    first = say(conv, "I need a train ticket from Boston to New York")
    assert first.state is not None
    turn = say(conv, again, session="s2")
    assert turn.state is not None and turn.state.task.id == first.state.task.id
    assert "Sorry" not in turn.reply and "not a date" not in turn.reply, turn.reply
    assert turn.reply.endswith(first.reply), (turn.reply, first.reply)  # the same question
    assert conv.runtime.open_tasks(ALICE) == [turn.state.task]  # not a second one


def test_the_request_again_with_a_new_value_fills_it_in_the_open_task(conv: Conversation) -> None:
    first = say(conv, "I need a train ticket from Boston to New York")
    assert first.state is not None
    turn = say(conv, "train ticket from Boston to New York next Friday", session="s2")
    assert turn.state is not None and turn.state.task.id == first.state.task.id
    assert turn.state.task.slots["travel_date"] == "2026-12-11", turn.reply


def test_a_correction_is_journaled_with_the_old_value(conv: Conversation) -> None:
    turn = say(conv, "从上海到苏州的火车票", "不是苏州，是杭州")
    assert turn.state is not None
    assert turn.state.task.slots["destination"] == "杭州"
    history = conv.runtime.history(ALICE, turn.state.task.id)
    assert "苏州" in str(history) and "杭州" in str(history)


# -- 11. synonyms -----------------------------------------------------------------------------


def test_a_synonym_in_the_slots_own_label_is_read_once() -> None:
    assert read(claim(), "严重程度：紧急", expecting="severity") == {"severity": "high"}


def test_a_declared_synonym_inside_a_sentence() -> None:
    assert read(claim(), "it's a minor thing really", expecting="severity") == {"severity": "low"}


@pytest.mark.parametrize("text", ["anything but first", "除了一等座都行"])
def test_a_negated_choice_is_no_choice(text: str) -> None:
    assert "seat" not in read(trip(), text, expecting="seat")


# -- the declaration says what it does --------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"extractor": "plase"},
        {"cues": ["from"]},
        {"cues": {"en": ["from {} to"]}},
        {"cues": {"en": [""]}},
        {"kind": "date", "extractor": "place"},
        {"kind": "number", "extractor": "person"},
        {"kind": "colour"},
        {"kind": "text", "minimum": 1},
        {"kind": "text", "region": "GB"},
        {"kind": "phone", "region": "britain"},
    ],
)
def test_a_typo_in_a_slot_is_refused_when_declared(options: dict[str, Any]) -> None:
    with pytest.raises(TemplateError):
        Slot("x", **options)


def test_the_cue_forms_that_are_accepted() -> None:
    slot = Slot("pickup", cues={"en": ["from {}", "from"], "zh": ["{}出发", "从"]})
    assert slot.cues["zh"] == ["{}出发", "从"]


# -- found on a third set of templates (users3): the same classes, other phrasings -----------


def delivery() -> TaskTemplate:
    return TaskTemplate(
        "sofa_delivery",
        titles={"en": "furniture delivery", "zh": "家具配送"},
        triggers={"en": ["delivery", "deliver"], "zh": ["送货", "配送"]},
        slots=[
            Slot("item", labels={"zh": "物品"}, ask={"en": "What are we delivering?"}),
            Slot("address", labels={"zh": "地址"}),
            Slot("delivery_date", kind="date", labels={"zh": "日期"}),
            Slot("floor", kind="number", labels={"zh": "楼层"}, ask={"en": "Which floor?"}),
            Slot("worth", kind="number", labels={"en": "value", "zh": "价值"}, required=False),
        ],
        stages=_flow(),
    )


@pytest.mark.parametrize(
    ("text", "floor"),
    [("It's on the 5th floor, no elevator", 5), ("住12楼", 12), ("floor 3", 3), ("2nd floor", 2)],
)
def test_a_floor_is_a_number_and_no_date(text: str, floor: int) -> None:
    values = read(delivery(), text, expecting="floor")
    assert values == {"floor": floor}


def test_a_house_number_is_no_date() -> None:
    values = read(delivery(), "送到徐汇区漕溪北路18号，this Sunday", opening=True)
    assert values["delivery_date"] == "2026-12-06"
    assert "18号" in values["address"]


@pytest.mark.parametrize(("text", "count"), [("2 train tickets", 2), ("两张高铁票", 2)])
def test_tickets_count_people(text: str, count: int) -> None:
    assert read(trip_with_count(), text).get("passengers") == count


def trip_with_count() -> TaskTemplate:
    return TaskTemplate(
        "rail",
        triggers={"en": ["train"], "zh": ["高铁"]},
        slots=[Slot("passengers", kind="count", ask={"en": "How many passengers?"})],
        stages=_flow(),
    )


def test_a_corrected_hour_keeps_the_held_half_of_the_day() -> None:
    said = {"at": "05:00"}
    assert read(table(), "sorry, 5:30 not 5", held=said, expecting="at") == {"at": "05:30"}
    said = {"at": "19:00"}
    assert read(table(), "8 instead of 7", held=said, expecting="at") == {"at": "20:00"}


@pytest.mark.parametrize(("text", "worth"), [("大概值三千", 3000), ("worth about 200", 200)])
def test_worth_is_an_amount(text: str, worth: int) -> None:
    assert read(delivery(), text, expecting="worth") == {"worth": worth}


@pytest.mark.parametrize("text", ["I'd like to schedule a furniture delivery", "预约家具配送"])
def test_the_request_is_no_free_text(text: str) -> None:
    assert "item" not in read(delivery(), text, opening=True)


def test_greetings_and_request_words_leave_the_item() -> None:
    said = "Hi, I need my new sofa delivered to 221 Maple Avenue on Monday"
    assert read(delivery(), said, opening=True)["item"] == "my new sofa"


def test_the_task_that_asked_last_takes_a_plain_answer(conv: Conversation) -> None:
    say(conv, "a table for tomorrow at 8pm, phone 415 555 0132, under Garcia")
    turn = say(conv, "and a hotel room in Boston from tomorrow for 2 nights")
    assert turn.state is not None and turn.state.task.type == "room_stay"
    turn = say(conv, "4 people")  # the hotel asked last; the table also counts people
    assert turn.state is not None and turn.state.task.type == "room_stay", turn.why
    assert turn.state.task.slots["guests"] == 4


def lost_report() -> TaskTemplate:
    return TaskTemplate(
        "lost_report",
        triggers={"en": ["left my", "lost my"], "zh": ["丢了", "落在"]},
        opening_slot="what",
        slots=[
            Slot("what", ask={"en": "What did you lose?"}),
            Slot("lost_on", kind="date", direction="past"),
            Slot("where", kind="place"),
        ],
        stages=_flow(),
    )


def taxi() -> TaskTemplate:
    return TaskTemplate(
        "taxi",
        triggers={"en": ["cab", "taxi"], "zh": ["打车", "出租车"]},
        slots=[Slot("pickup_day", kind="date"), Slot("city", kind="place")],
        stages=_flow(),
    )


@pytest.mark.parametrize(
    "text",
    ["I left my phone in a cab last night in Chicago", "昨晚在上海打车，把手机落在出租车上了"],
)
def test_a_date_the_wrong_way_is_no_evidence_for_a_booking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", NOW)
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/w.db"), [lost_report(), taxi()])
    try:
        turn = Conversation(rt).handle(ALICE, text, "s1")
        assert turn.state is not None and turn.state.task.type == "lost_report", turn.why
        assert turn.state.task.slots["lost_on"] == "2026-12-02"
    finally:
        rt.close()
