"""Why a value was refused, as data: so that a reply can say it in the user's language.

A :class:`Problem` is the English sentence itself (it is a ``str``, for logs, the API and
old callers) plus a ``code`` and what it is about (the value given, the options there were).
"""

from __future__ import annotations

from collections.abc import Sequence

CODES = (
    "required",  # nothing was given
    "form",  # does not match the slot's pattern
    "choice",  # not one of the choices
    "date",  # not a date that can be understood
    "invalid_date",  # a date that does not exist (Feb 30)
    "number",  # not a number
    "place",  # does not look like a place
    "name",  # does not look like a name
    "order",  # does not look like an order number
    "ambiguous",  # more than one value given
    "unknown",  # a look-up did not find it (an unknown order number)
    "too_large",  # above what is allowed (options: the limit)
    "too_small",  # below what is allowed (options: the limit)
    "whole",  # a count that is not a whole number ("2.5 guests")
    "time",  # not a time of day
    "phone",  # not a phone number
    "email",  # not an email address
    "custom",  # a template's own check; only its English text is known
)


class Problem(str):
    """The English reason, with its ``code``, the ``value`` given and the ``options``."""

    code: str
    value: str | None
    options: tuple[str, ...]

    def __new__(
        cls,
        code: str,
        text: str,
        *,
        value: object = None,
        options: Sequence[object] = (),
    ) -> Problem:
        if code not in CODES:
            raise ValueError(f"unknown problem code {code!r}")
        obj = super().__new__(cls, text)
        obj.code = code
        obj.value = None if value is None else str(value)
        obj.options = tuple(str(o) for o in options)
        return obj


def custom(text: str, value: object = None) -> Problem:
    """A reason only known in English (a parser's message)."""
    return text if isinstance(text, Problem) else Problem("custom", text, value=value)
