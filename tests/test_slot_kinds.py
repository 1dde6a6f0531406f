"""The slot kinds for what people say (count, time, phone, email, place, person) on every
store backend: a value is normalised once, stored as plain JSON, read back the same; a bad
one is refused with a reason and leaves what the Task holds untouched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from relaystate import (
    InvalidSlot,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
)

ALICE = Scope.user("alice")


def booking() -> TaskTemplate:
    return TaskTemplate(
        "dinner",
        slots=[
            Slot("party", kind="count", maximum=12),
            Slot("at", kind="time"),
            Slot("phone", kind="phone", region="GB"),
            Slot("email", kind="email"),
            Slot("city", kind="place"),
            Slot("host", kind="person"),
            Slot("budget", kind="number", minimum=0),
        ],
        stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
    )


@pytest.fixture
def rt(any_store_url: str) -> Iterator[Runtime]:
    with Runtime(open_store(any_store_url), [booking()]) as runtime:
        yield runtime


def test_each_kind_is_normalised_stored_and_read_back(rt: Runtime) -> None:
    task = rt.start(ALICE, "dinner", slots={"party": "4", "at": "7:30pm"}).task
    rt.fill(
        ALICE,
        task.id,
        {
            "phone": "020 7946 0958",
            "email": " Li.Ting@Example.com ",
            "city": " Paris ",
            "host": "Li Ting",
            "budget": "120.50",
        },
    )
    slots = rt.task(ALICE, task.id).task.slots
    assert slots == {
        "party": 4,
        "at": "19:30",
        "phone": "+442079460958",
        "email": "Li.Ting@example.com",
        "city": "Paris",
        "host": "Li Ting",
        "budget": 120.5,
    }
    assert isinstance(slots["party"], int)


@pytest.mark.parametrize(
    ("slot", "value", "code"),
    [
        ("party", "2.5", "whole"),
        ("party", "0", "too_small"),
        ("party", "40", "too_large"),
        ("at", "25:00", "time"),
        ("phone", "12", "phone"),
        ("email", "li.ting@", "email"),
        ("budget", "-3", "too_small"),
    ],
)
def test_a_bad_value_is_refused_and_the_held_one_kept(
    rt: Runtime, slot: str, value: str, code: str
) -> None:
    task = rt.start(ALICE, "dinner", slots={"party": 2, "at": "19:00"}).task
    rt.fill(ALICE, task.id, {"phone": "+44 20 7946 0958", "email": "a@example.com"})
    before = rt.task(ALICE, task.id).task
    with pytest.raises(InvalidSlot) as refused:
        rt.fill(ALICE, task.id, {slot: value})
    assert refused.value.slot == slot
    assert getattr(refused.value.reason, "code", None) == code, refused.value.reason
    after = rt.task(ALICE, task.id).task
    assert (after.slots, after.version) == (before.slots, before.version)
