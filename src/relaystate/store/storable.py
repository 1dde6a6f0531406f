"""Text no backend can store, refused alike on every one before it reaches SQL.

PostgreSQL rejects a NUL in any text parameter (a driver error), SQLite would store it or
match nothing: so the memory roles of both check their input here first and say
:class:`~relaystate.errors.InvalidInput`, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import inputs
from ..model import MemoryItem


def refuse_unstorable(field: str, values: Iterable[str | None]) -> None:
    """Refuse a NUL or a lone surrogate in any of ``values`` as InvalidInput naming ``field``."""
    for n, value in enumerate(values):
        if value is not None:
            inputs.storable(value, f"{field}[{n}]")  # no length limit: layers are long


def storable_items(items: Sequence[MemoryItem]) -> None:
    """Refuse memory items whose texts, ids or metadata no backend can store."""
    for n, item in enumerate(items):
        refuse_unstorable(f"items[{n}]", (item.id, item.text, item.source, item.task_id))
        refuse_unstorable(f"items[{n}].cites", item.cites)
        inputs.json_value(item.metadata, f"items[{n}].metadata")
