"""Task templates and a pinned day for the conversation tests."""

from __future__ import annotations

from datetime import date
from typing import Any

from relaystate import Slot, Stage, TaskTemplate

#: A Sunday, so "next Wednesday" and 下周三 have one exact answer (2026-12-02).
TODAY = date(2026, 11, 29)


def not_past(value: Any) -> Any:
    if date.fromisoformat(str(value)) < TODAY:
        raise ValueError("that date has already passed")
    return value


def positive(value: Any) -> Any:
    if float(value) <= 0:
        raise ValueError("the amount must be more than zero")
    return value


def flight() -> TaskTemplate:
    return TaskTemplate(
        "flight_booking",
        slots=[
            Slot(
                "origin",
                extractor="place",
                cues={
                    "en": ["from", "leaving from", "departing from", "{} to"],
                    "zh": ["从", "出发地", "{}出发", "{}到", "{}飞"],
                },
                ask={"en": "Where are you flying from?", "zh": "您从哪里出发？"},
            ),
            Slot(
                "destination",
                extractor="place",
                cues={
                    "en": ["to", "flying to", "going to"],
                    "zh": ["到", "去", "飞", "飞往", "前往", "目的地"],
                },
                ask={"en": "Where are you flying to?", "zh": "您要去哪里？"},
            ),
            Slot("date", kind="date", parser=not_past),
            Slot(
                "cabin_class",
                choices=["economy", "business", "first"],
                synonyms={
                    "经济舱": "economy",
                    "商务舱": "business",
                    "头等舱": "first",
                    "biz": "business",
                    "coach": "economy",
                },
            ),
            Slot("passenger_name", extractor="person"),
        ],
        stages=[Stage("collecting")],
    )


def refund() -> TaskTemplate:
    return TaskTemplate(
        "refund",
        slots=[
            Slot("order_number", pattern=r"ORD-\d{5}"),
            Slot(
                "reason",
                cues={
                    "en": ["because", "the reason is", "since"],
                    "zh": ["因为", "原因是", "由于"],
                },
            ),
            Slot("amount", kind="number", extractor="amount", parser=positive),
        ],
        stages=[Stage("collecting")],
    )


def bare_flight() -> TaskTemplate:
    """The flight booking as the demo declares it: no extractors, no cues."""
    return TaskTemplate(
        "flight_booking",
        slots=[
            Slot("origin"),
            Slot("destination"),
            Slot("date", kind="date"),
            Slot(
                "cabin_class",
                choices=["economy", "business", "first"],
                synonyms={"经济舱": "economy", "商务舱": "business", "头等舱": "first"},
            ),
            Slot("passenger_name"),
        ],
        stages=[Stage("collecting")],
    )
