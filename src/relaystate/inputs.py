"""What the runtime accepts from outside, checked once at the front door.

Every backend stores what passes here, so the rules are the narrowest any backend needs,
applied before anything is read or written: SQLite takes a NUL or a 6,000-character id
where PostgreSQL raises a driver error, and one call must succeed or fail the same way on
both. A refusal is :class:`~relaystate.errors.InvalidInput`, naming the field and the
problem.

* Text (a turn's words, a goal, a message, every string inside slot values, context or an
  operator's output): valid Unicode (no lone surrogate, which UTF-8 cannot encode), no NUL
  (PostgreSQL text cannot hold it), at most :func:`max_text` characters: 10,000 unless
  ``RELAYSTATE_MAX_TEXT`` or ``Runtime.max_text`` says otherwise. A turn's cost grows faster
  than its length (20,000 characters take ~0.3 s, 100,000 take ~5 s), and 10,000 is pages
  more than anyone types into a chat.
* Ids (user, session, task, idempotency key, task type, an admin's name, a role, a
  language): 1 to 200 characters, none a control, format, separator or private-use
  character (the space between words aside), no space at either end. uuid hex, "alice",
  "alice@example.com", "ORD-10001" and "订单-7" all pass.
* Numbers: finite, and an int must fit a float: NaN is not JSON, and a value that is inf
  the first time arithmetic meets it (a 400-digit amount) is no number.
* JSON values (context, an operator's output): plain JSON only (dicts with text keys,
  lists, text, numbers, booleans, null), at most 32 levels deep and 10,000 items.
* Slot values: the same checks of what they contain, but of any type: the slot's own
  validation turns a ``date`` into ISO text (:meth:`relaystate.task.templates.Slot.validate`).
* Times: a datetime without a timezone is read as UTC, as the CLI's ``--at`` does and as
  the store keeps every time.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidInput
from .model import Message, TaskStatus
from .scope import Scope, checked

MAX_TEXT_ENV = "RELAYSTATE_MAX_TEXT"
DEFAULT_MAX_TEXT = 10_000
MAX_ID = 200
MAX_DEPTH = 32
MAX_ITEMS = 10_000
MAX_COUNT = 2**31 - 1
"""The largest limit, page or message id a call may pass (a 32-bit int on every backend)."""
MAX_SAFE_INTEGER = 2**53 - 1
"""The largest number a slot of kind "number" holds: beyond it a float no longer keeps
every integer, so the value read back is not the one given (RFC 8259's interoperable range)."""
MAX_TTL = timedelta(days=366)
MAX_RETENTION = timedelta(days=36_525)


def max_text(override: int | None = None) -> int:
    """The most characters a text may have: ``override``, else ``RELAYSTATE_MAX_TEXT``,
    else 10,000."""
    if override is not None:
        limit: object = override
        where = "Runtime.max_text"
    else:
        raw = os.environ.get(MAX_TEXT_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_TEXT
        where = MAX_TEXT_ENV
        try:
            limit = int(raw)
        except ValueError:
            raise InvalidInput(where, f"{raw!r} is not a whole number of characters") from None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidInput(where, f"must be a whole number of characters >= 1, not {limit!r}")
    return limit


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _given(value: object) -> str:
    """What was given, for an error: its type and the start of its repr."""
    return "None" if value is None else f"{type(value).__name__} {value!r:.40}"


def _char(ch: str) -> str:
    return ascii(ch)[1:-1] if not ch.isprintable() else ch


def storable(value: object, field: str) -> str:
    """``value`` if it is text every backend stores as given (no NUL, no lone surrogate),
    whatever its length: for what a store keeps that no turn typed (a derived document)."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be text (str), not {_kind(value)}")
    _unicode(value, field)
    return value


def text(value: object, field: str, *, limit: int | None = None) -> str:
    """``value`` if it is text every backend stores as given; else InvalidInput."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be text (str), not {_kind(value)}")
    cap = max_text(limit)
    if len(value) > cap:
        raise InvalidInput(
            field, f"is {len(value):,} characters long; at most {cap:,} are accepted"
        )
    _unicode(value, field)
    return value


REQUEST_KEY = re.compile(r"[\x21-\x7e]{1,255}")
"""A client's request key: 1-255 visible ASCII characters (a UUID, a ULID, "turn-42")."""


def request_key(value: object) -> str:
    """``value`` if it is a usable request key (HTTP ``Idempotency-Key``); else InvalidInput."""
    if not isinstance(value, str) or not REQUEST_KEY.fullmatch(value):
        raise InvalidInput(
            "request_key",
            "must be 1-255 visible ASCII characters (no spaces), such as a UUID",
        )
    return value


def _unicode(value: str, field: str) -> None:
    nul = value.find("\x00")
    if nul >= 0:
        raise InvalidInput(field, f"contains a NUL character (\\x00) at position {nul}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = _char(value[exc.start])
        raise InvalidInput(
            field, f"is not valid Unicode: a lone surrogate ({bad}) at position {exc.start}"
        ) from None


_NOT_IN_ID = (
    "\x00-\x1f\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u1680"
    "\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ue000-\uf8ff\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000f0000-\U0010ffff"
)
"""Every control (Cc), format (Cf), separator (Zs, Zl, Zp) and private-use (Co) character of
Unicode 14, and the space: what an id may not hold (but the space between words). Surrogates
(Cs) are refused before, as in any text; one class serves :func:`identifier` and schemas."""
TEXT_PATTERN = (
    r"^[^\x00]*[^\x00\x09-\x0d \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    r"[^\x00]*$"
)
"""Text as a schema states it: something besides white space, and no NUL (which no
backend stores); its length limit is :func:`max_text`. White space is spelled out (Unicode's
White_Space), not ``\\s``, which Python, Rust and ECMA-262 each read differently."""
ID_PATTERN = f"^[^ {_NOT_IN_ID}](?:[^{_NOT_IN_ID}]*[^ {_NOT_IN_ID}])?$"
"""The id rule as a regular expression, for schemas (OpenAPI): Python's ``re`` and the Rust
regex of pydantic-core read it the same way."""
_BAD_IN_ID = re.compile(f"[{_NOT_IN_ID}]")


def identifier(value: object, field: str) -> str:
    """An id (user, session, task, key...): 1-200 characters, none of them a control,
    format, separator or private-use character but the space between words; none at either
    end. Letters of any script, digits, punctuation and symbols (emoji) are ids."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be text (str), not {_kind(value)}")
    if not value:
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_ID:
        raise InvalidInput(field, f"is {len(value):,} characters long; at most {MAX_ID} for an id")
    bad = _BAD_IN_ID.search(value.replace(" ", "x"))
    if bad is not None:
        raise InvalidInput(
            field,
            f"contains a character an id may not have ({_char(bad.group())}) "
            f"at position {bad.start()}",
        )
    _unicode(value, field)  # a lone surrogate
    if value != value.strip(" "):
        raise InvalidInput(field, "starts or ends with a space")
    return value


def number(value: object, field: str) -> None:
    """Refuse NaN, infinities and ints too large for a float (they overflow to inf)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(field, f"{value} is not a finite number")
    if isinstance(value, int) and value.bit_length() > 1024:  # 2**1024 > the largest float
        raise InvalidInput(field, f"a {len(str(abs(value)))}-digit number is too large")


_SCALARS = (str, int, float, bool, type(None))


def json_value(value: object, field: str, *, limit: int | None = None, plain: bool = True) -> None:
    """Check a JSON value and everything in it: text, numbers, depth, size.

    ``plain``: only JSON types (else other scalars pass, for a slot's validation to convert).
    """
    cap = max_text(limit)
    stack: list[tuple[object, str, int]] = [(value, field, 0)]
    items = 0
    while stack:
        node, where, depth = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            raise InvalidInput(field, f"has more than {MAX_ITEMS:,} values")
        if isinstance(node, str):
            text(node, where, limit=cap)
        elif isinstance(node, int | float):
            number(node, where)
        elif isinstance(node, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidInput(where, f"is nested more than {MAX_DEPTH} levels deep")
            if isinstance(node, Mapping):
                for key, child in node.items():
                    if not isinstance(key, str):
                        raise InvalidInput(where, f"has a key that is not text: {key!r}")
                    text(key, f"{where} key {key[:20]!r}", limit=cap)
                    stack.append((child, f"{where}[{key!r}]", depth + 1))
            else:
                stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(node))
        elif plain and not isinstance(node, _SCALARS):
            raise InvalidInput(where, f"{_kind(node)} is not JSON (text, number, list, dict...)")


def moment(value: object, field: str) -> datetime:
    """A datetime, read as UTC when it has no timezone (the store keeps every time in UTC)."""
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a datetime, not {_kind(value)}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc(value: datetime | None) -> datetime | None:
    """A checked datetime with its timezone: UTC when it had none."""
    return None if value is None else moment(value, "time")


def history_point(value: object) -> int | datetime | None:
    """A point of a task's history for replay: a version (>= 1), a time, or None (latest)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return moment(value, "upto")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise InvalidInput("upto", f"versions start at 1, not {value}")
        return value
    raise InvalidInput("upto", f"must be a version number (int) or a datetime, not {_given(value)}")


def count(value: object, field: str) -> None:
    """A limit, page size or position: a whole number from 0 to 2**31 - 1."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(field, f"must be a whole number (int), not {_kind(value)}")
    if not 0 <= value <= MAX_COUNT:
        raise InvalidInput(field, f"must be from 0 to {MAX_COUNT:,}, not {value:,}")


def duration(value: object, field: str, most: timedelta) -> None:
    """A timedelta from zero to ``most`` (beyond it, date arithmetic leaves the calendar)."""
    if not isinstance(value, timedelta):
        raise InvalidInput(field, f"must be a timedelta, not {_kind(value)}")
    if not timedelta(0) <= value <= most:
        raise InvalidInput(field, f"must be from 0 to {most.days:,} days, not {value}")


def timezone(value: object, field: str) -> None:
    """An IANA timezone name this machine knows ("Asia/Shanghai")."""
    name = identifier(value, field)
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(field, f"unknown timezone {name!r}") from None


def flag(value: object, field: str) -> None:
    """A yes/no: a real bool, so that confirm(task, "no") is not read as yes."""
    if not isinstance(value, bool):
        raise InvalidInput(field, f"must be True or False, not {_given(value)}")


def statuses(value: object, field: str) -> None:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidInput(field, f"must be a list of task statuses, not {_kind(value)}")
    known = {str(s) for s in TaskStatus}
    for item in value:
        if not isinstance(item, str) or item not in known:
            raise InvalidInput(field, f"{item!r} is not one of {', '.join(sorted(known))}")


def messages(value: object, field: str, *, limit: int | None = None) -> None:
    """Messages a direct call records: Message objects or (role, text) pairs."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(field, f"must be a list of messages, not {_kind(value)}")
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        if isinstance(item, Message):
            role, said = item.role, item.text
            identifier(item.session_id, f"{where}.session_id")
            identifier(item.user_id, f"{where}.user_id")
        elif isinstance(item, tuple) and len(item) == 2:
            role, said = item
        else:
            raise InvalidInput(where, f"must be a Message or a (role, text) pair, not {item!r:.40}")
        identifier(role, f"{where}.role")
        text(said, f"{where}.text", limit=limit)


def _mapping(value: object, field: str, limit: int | None, plain: bool) -> None:
    if not isinstance(value, Mapping):
        raise InvalidInput(field, f"must be a mapping of names to values, not {_kind(value)}")
    json_value(value, field, limit=limit, plain=plain)


Checker = Callable[[object, str, int | None], None]


def _id(value: object, field: str, limit: int | None) -> None:
    identifier(value, field)


def _text(value: object, field: str, limit: int | None) -> None:
    text(value, field, limit=limit)


def _datetime(value: object, field: str) -> None:
    moment(value, field)


_FIELDS: dict[str, tuple[str, bool, Checker]] = {
    # key: (the field's name in an error, None allowed, the check)
    "session_id": ("session_id", True, _id),
    "task_id": ("task_id", False, _id),
    "new_task_id": ("task_id", True, _id),
    "type": ("type", False, _id),
    "key": ("idempotency key", False, _id),
    "language": ("language", True, _id),
    "timezone": ("timezone", True, lambda v, f, _: timezone(v, f)),
    "text": ("text", False, _text),
    "goal": ("goal", True, _text),
    "slots": ("slots", False, lambda v, f, n: _mapping(v, f, n, plain=False)),
    "context": ("context", True, lambda v, f, n: _mapping(v, f, n, plain=True)),
    "output": ("output", True, lambda v, f, n: json_value(v, f, limit=n)),
    "messages": ("messages", False, lambda v, f, n: messages(v, f, limit=n)),
    "yes": ("yes", False, lambda v, f, _: flag(v, f)),
    "succeeded": ("succeeded", False, lambda v, f, _: flag(v, f)),
    "run": ("run", False, lambda v, f, _: flag(v, f)),
    "seq": ("seq", False, lambda v, f, _: count(v, f)),
    "seen": ("seen", True, lambda v, f, _: count(v, f)),
    "limit": ("limit", True, lambda v, f, _: count(v, f)),
    "page": ("page", False, lambda v, f, _: count(v, f)),
    "before": ("before", True, lambda v, f, _: count(v, f)),
    "statuses": ("statuses", True, lambda v, f, _: statuses(v, f)),
    "ttl": ("ttl", True, lambda v, f, _: duration(v, f, MAX_TTL)),
    "retention": ("retention", True, lambda v, f, _: duration(v, f, MAX_RETENTION)),
    "now": ("now", True, lambda v, f, _: _datetime(v, f)),
}


def check(scope: object, *, max_text: int | None = None, **fields: Any) -> Scope:
    """Check the scope and every named argument of a public call; the scope, checked.

    A TypeError for a missing scope (a bug in the caller, not bad input), InvalidInput
    naming the first argument that fails (None where a value is required fails too). The
    names are the runtime's parameter names (``new_task_id`` is a ``task_id`` that may be
    None: a new task gets one).
    """
    scope = checked(scope)
    if scope.is_admin:
        identifier(scope.by, "admin scope's name")
    else:
        identifier(scope.user_id, "user_id")
    for key, value in fields.items():
        name, optional, run = _FIELDS[key]
        if value is None and optional:
            continue
        run(value, name, max_text)  # None where a value is required: "must be ..., not None"
    return scope


def known_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``fields`` that :func:`check` has a rule for (an edit's other fields
    are its own code's to check)."""
    return {key: value for key, value in fields.items() if key in _FIELDS}
