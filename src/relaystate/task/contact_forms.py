"""The stored forms of a phone number and an email address, shared by a slot's validation
(:mod:`.templates`) and the conversation's scan of what people type (``conversation.contacts``),
so that both store one number or address alike."""

from __future__ import annotations

import re
from collections.abc import Iterable

EMAIL = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"
)
"""An address as people type it (the dot-atom form of RFC 5322, a domain with a TLD)."""


def e164(text: str, regions: Iterable[str | None]) -> str | None:
    """``text`` as a phone number in E.164 (+8613800138000), read in the first of
    ``regions`` where it is a valid number (phonenumbers, Google's libphonenumber), or None."""
    import phonenumbers  # about 20 ms to import: only once a phone is read

    for region in dict.fromkeys(regions):
        try:
            number = phonenumbers.parse(text, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return None


def email_address(text: str) -> str | None:
    """``text`` as an email address, its domain in lower case (the part before @ is kept as
    typed, as mail servers may read it), or None when it is not one."""
    text = text.strip()
    if not EMAIL.fullmatch(text) or len(text) > 254:
        return None
    local, _, domain = text.rpartition("@")
    return f"{local}@{domain.lower()}"
