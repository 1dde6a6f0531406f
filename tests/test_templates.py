"""How task types are declared: slot validation and template checks."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from relaystate import InvalidSlot, Slot, Stage, TaskTemplate, TemplateError


def test_choice_slots_accept_names_case_and_synonyms() -> None:
    cabin = Slot("cabin", choices=["economy", "business"], synonyms={"商务舱": "business"})
    assert cabin.kind == "choice"
    assert cabin.validate("Business") == "business"
    assert cabin.validate("商务舱") == "business"
    with pytest.raises(InvalidSlot, match="not one of economy, business"):
        cabin.validate("first")


def test_dates_numbers_patterns_and_parsers_normalise_or_explain() -> None:
    when = Slot("date", kind="date")
    assert when.validate("2027-01-22") == "2027-01-22"
    assert when.validate(date(2027, 1, 22)) == "2027-01-22"
    assert when.validate(datetime(2027, 1, 22, 8, 30)) == "2027-01-22"
    with pytest.raises(InvalidSlot, match="is not a date"):
        when.validate("next tuesday-ish")
    amount = Slot("amount", kind="number")
    assert amount.validate("30") == 30 and amount.validate("12.5") == 12.5
    with pytest.raises(InvalidSlot):
        amount.validate(True)
    with pytest.raises(InvalidSlot, match="is not a number"):
        amount.validate("lots")
    order = Slot("order_id", pattern=r"ORD-\d{5}")
    assert order.validate(" ORD-00042 ") == "ORD-00042"
    with pytest.raises(InvalidSlot, match="expected form"):
        order.validate("42")
    upper = Slot("code", parser=lambda v: str(v).upper())
    assert upper.validate("ab") == "AB"

    def reject(value: object) -> object:
        raise ValueError("must be positive")

    with pytest.raises(InvalidSlot, match="must be positive"):
        Slot("n", parser=reject).validate(1)
    with pytest.raises(InvalidSlot, match="required"):
        Slot("x").validate("  ")


def test_questions_per_language_with_a_fallback() -> None:
    slot = Slot("destination", ask={"en": "Where to?", "zh": "去哪里？"})
    assert slot.question("zh") == "去哪里？"
    assert slot.question("fr") == "Where to?"
    assert Slot("passenger_name").question() == "What is the passenger name?"


def test_bad_declarations_fail_early() -> None:
    with pytest.raises(TemplateError, match="needs choices"):
        Slot("c", kind="choice")
    with pytest.raises(TemplateError, match="kind must be"):
        Slot("c", kind="colour")
    with pytest.raises(TemplateError, match="at least one stage"):
        TaskTemplate("t")
    with pytest.raises(TemplateError, match="duplicate slot"):
        TaskTemplate("t", slots=[Slot("a"), Slot("a")], stages=[Stage("s")])
    template = TaskTemplate("t", stages=[Stage("run", actions=["missing"])])
    with pytest.raises(TemplateError, match="undeclared action 'missing'"):
        template.validate()

    @template.action
    def missing(ctx: object) -> None:
        return None

    template.validate()
    assert template.planned_actions == 1
    with pytest.raises(TemplateError, match="declared twice"):
        template.action(name="missing")(lambda ctx: None)
