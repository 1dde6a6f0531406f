"""Phone numbers and email addresses wherever they are said: "电话138-0013-8000", "my cell is
212 555 0199", "+44 7700 900123", "email me at j.doe@example.org".

Phone numbers are found and checked by phonenumbers (Google's libphonenumber): a run of
digits is a phone number only when it is a valid one in some country, read in the slot's
region first, then in the conversation's (zh: CN; en: US, then GB), so "415-555-0123" is a
US number, "07700 900123" a British one, "13800138000" a Chinese mobile. Values are E.164.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..task.contact_forms import e164, email_address

_DIGITS = re.compile(
    r"(?<![A-Za-z0-9.+\-/:])(?:\+\s?\d{1,3}[\s\-.]?)?(?:\(?\d{2,5}\)?[\s\-.]?){1,5}\d{2,5}"
    r"(?![A-Za-z0-9\-/:])"
)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9.+\-_%])[A-Za-z0-9][A-Za-z0-9._%+\-]*@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,}(?![A-Za-z0-9\-])"
)
_CN_MOBILE = re.compile(r"1[3-9]\d{9}")


@dataclass(frozen=True)
class Found:
    """A phone number or an address in the text, as its slot stores it."""

    start: int
    end: int
    value: str


def regions(language: str, declared: str | None = None) -> list[str]:
    """The countries a number without +code is tried in, in order."""
    order = ["CN", "US", "GB"] if language == "zh" else ["US", "GB", "CN"]
    return list(dict.fromkeys([r for r in (declared, *order) if r]))


def scan_phones(text: str, order: Sequence[str]) -> list[Found]:
    """Every valid phone number of ``text`` (E.164), in order."""
    found: list[Found] = []
    for m in _DIGITS.finditer(text):
        raw = m.group().strip()
        digits = re.sub(r"\D", "", raw)
        if not 7 <= len(digits) <= 15:
            continue
        value = _valid(raw, digits, order)
        if value is not None:
            found.append(Found(m.start(), m.start() + len(raw), value))
    return found


def _valid(raw: str, digits: str, order: Sequence[str]) -> str | None:
    tried = list(order)
    if not raw.startswith("+") and _CN_MOBILE.fullmatch(digits):
        tried = ["CN", *tried]  # 11 digits from 13x-19x: a Chinese mobile wherever it is said
    return e164(raw, tried)


def scan_emails(text: str) -> list[Found]:
    """Every email address of ``text``, its domain in lower case, in order."""
    out = []
    for m in _EMAIL.finditer(text):
        address = email_address(m.group())
        if address is not None:
            out.append(Found(m.start(), m.end(), address))
    return out
