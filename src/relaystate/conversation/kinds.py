"""How a slot is read from what people say: its reader, from its declared kind, else guessed
from how the template names it, labels it and asks for it.

A template written by someone who never read the engine says ``Slot("nights",
kind="number", ask={"en": "How many nights?"})`` or ``Slot("phone")``: the question says the
first is a count of nights, the name that the second is a phone number. Declared kinds
(``kind="count"``, ``kind="time"``) always win; the guess only reads a slot declared ``text``
or ``number``, and never changes how its value is validated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..task.templates import Slot
from .text import fold
from .words import PERSON_NAMES, PLACE_NAMES

KIND_READERS = ("count", "time", "phone", "email", "place", "person")
"""Slot kinds that are read by the reader of the same name."""

_MONEY = re.compile(
    r"(?<![a-z])(?:amount|price|cost|fee|fare|budget|refund|payment|pay|paid|salary|rent|"
    r"deposit|total|sum|money|how much|dollars?|euros?|yuan|rmb)(?![a-z])|金额|价格|价钱|费用|"
    r"多少钱|预算|租金|钱|款|元|块"
)
_COUNT = re.compile(
    r"(?<![a-z])(?:how many|number of|nights?|guests?|people|persons?|party|adults?|children|"
    r"kids|rooms?|beds?|bedrooms?|tickets?|seats?|quantity|qty|count|pax|travell?ers|"
    r"passengers|attendees|participants|hours|days|weeks|items|pieces|bags|boxes|copies|units|"
    r"members|heads|size)(?![a-z])|几(?![点号月时])|多少(?:个|位|人|张|间|晚|天|件|次)|人数|"
    r"晚数|张数|间数|数量|天数|时长"
)
_MEASURE = re.compile(
    r"(?<![a-z])(?:kg|kgs|kilos?|kilograms?|grams?|lbs?|pounds|km|miles?|meters?|metres?|"
    r"litres?|liters?|square|sq|weight|heavy|distance|size in|area|volume|temperature|"
    r"floors?|storey|level)(?![a-z])|公斤|千克|克|斤|公里|米|升|重量|多重|面积|平米|平方|楼层|几楼|几层"
)
_TIME = re.compile(
    r"(?<![a-z])(?:time|hour|what time|when exactly|o'clock|slot)(?![a-z])|时间|几点|时刻|钟点"
)
_PHONE = re.compile(
    r"(?<![a-z])(?:phone|tel|telephone|mobile|cell|cellphone|whatsapp|number to call|"
    r"call you|contact number)(?![a-z])|电话|手机|联系方式|号码"
)
_EMAIL = re.compile(r"(?<![a-z])(?:e-?mail|email address|mail)(?![a-z])|邮箱|邮件|电子邮")
_ADDRESS = re.compile(r"(?<![a-z])(?:address|street|where should .* come)(?![a-z])|地址|住址")
_PERSON = re.compile(
    r"(?<![a-z])(?:name|patient|driver|guest|member|owner|buyer|customer|client|passenger|"
    r"traveller|traveler|recipient|sender|attendee|holder|applicant|student|caller|booker|"
    r"who)(?![a-z])|姓名|名字|称呼|怎么称呼|叫什么|就诊人|入住人|联系人|驾驶人|购票人|主人|会员|"
    r"乘客|乘机人|收件人|寄件人|客户|顾客|患者|病人"
)
_PLACE = re.compile(
    r"(?<![a-z])(?:city|town|airport|destination|origin|which city|what city)(?![a-z])|"
    r"城市|哪个城市|目的地|出发地|机场"
)


def extractor_of(slot: Slot) -> str:
    """How ``slot`` is read: "date", "choice", or one of EXTRACTORS.

    A declared kind other than text and number reads as itself; ``extractor=`` reads a text
    slot (and is checked); else the slot's name, then its labels and questions, say what it
    holds: a number about money reads as an amount, one that counts as a count, a measure as
    a number; a text slot named or asked like a time, a phone, an email, an address, a
    person or a place reads as one.
    """
    if slot.kind in ("date", "choice"):
        return slot.kind
    if slot.kind in KIND_READERS:
        return slot.kind
    if slot.extractor is not None:  # checked when the slot was declared
        return slot.extractor
    name = " ".join(slot.name.lower().split("_"))
    said = said_of(slot)
    if slot.kind == "number":
        for text in (name, said):
            if _MONEY.search(text):
                return "amount"
            if _COUNT.search(text):
                return "count"
            if _MEASURE.search(text):
                return "number"
        return "amount"
    words = slot.name.lower().split("_")
    if words[0] == "order" and slot.pattern is None:
        return "order_id"
    if slot.pattern is not None:
        return "text"
    for text in (name, said):
        found = _text_reader(text, slot)
        if found is not None:
            return found
    if words[-1] in PERSON_NAMES or words[0] in ("passenger", "traveller", "traveler"):
        return "person"
    if any(w in PLACE_NAMES for w in words):
        return "place"
    return "text"


def _text_reader(words: str, slot: Slot) -> str | None:
    """The reader ``words`` (a slot's name, or what it is called and asked) point to."""
    if _EMAIL.search(words):
        return "email"
    if _PHONE.search(words):
        return "phone"
    if _TIME.search(words) and not _COUNT.search(words):
        return "time"
    if _ADDRESS.search(words):
        return "address"
    if _PLACE.search(words):
        return "place"
    if _PERSON.search(words) and not _free(slot):
        return "person"
    return None


def _free(slot: Slot) -> bool:
    """A slot named for what happened or why (a description), never a name."""
    return bool(
        re.search(
            r"(?<![a-z])(?:what|why|describe|description|details?|problem)(?![a-z])", said_of(slot)
        )
    )


def said_of(slot: Slot) -> str:
    """What a template calls a slot and how it asks for it, folded, in one string."""
    return " | ".join(fold(t) for t in _texts(slot) if t)


def _texts(slot: Slot) -> Iterable[str]:
    yield from slot.labels.values()
    yield from slot.ask.values()
