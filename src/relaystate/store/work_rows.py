"""The work queue's SQL pieces shared by SQLite and PostgreSQL: which rows a worker may
claim, and rows back into :class:`WorkItem` and :class:`WorkerStatus`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..model import WorkerInfo, WorkerStatus, WorkItem, from_iso

WORK_COLUMNS = "task_id, user_id, type, template_version, build, due_at, owner, lease_until"


@dataclass(frozen=True)
class Claimable:
    """SQL fragments (and their arguments) choosing the rows a claimer may take."""

    gone_sql: str
    """Appended to an OR: the holder is one of the processes known to be gone."""
    gone_args: list[object]
    kinds_sql: str
    """The item's type and version are ones the claimer runs."""
    kind_args: list[object]


def claimable(
    runnable: Mapping[str, Collection[int]], gone: Collection[str], mark: str
) -> Claimable | None:
    """The fragments with ``mark`` placeholders; None when the claimer runs nothing."""
    kinds = [(t, sorted(set(v))) for t, v in sorted(runnable.items()) if v]
    if not kinds:
        return None
    gone_ids: list[object] = list(sorted(gone))
    gone_sql = f" OR owner IN ({', '.join([mark] * len(gone_ids))})" if gone_ids else ""
    parts, args = [], []
    for type_, versions in kinds:
        marks = ", ".join([mark] * len(versions))
        parts.append(f"(type = {mark} AND template_version IN ({marks}))")
        args += [type_, *versions]
    return Claimable(gone_sql, gone_ids, " OR ".join(parts), args)


def _time(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return from_iso(str(value))


def work_item(row: Sequence[object]) -> WorkItem:
    due = _time(row[5])
    assert due is not None
    return WorkItem(
        task_id=str(row[0]),
        user_id=str(row[1]),
        type=str(row[2]),
        template_version=int(str(row[3])),
        build=None if row[4] is None else str(row[4]),
        due_at=due,
        owner=None if row[6] is None else str(row[6]),
        lease_until=_time(row[7]),
    )


def worker_status(row: Sequence[object]) -> WorkerStatus:
    """A row of id, host, pid, build, started_at, role, heartbeat_at, stopped_at, claimed."""
    started = _time(row[4])
    assert started is not None
    info = WorkerInfo(str(row[0]), str(row[1]), int(str(row[2])), str(row[3]), started)
    return WorkerStatus(info, str(row[5]), _time(row[6]), _time(row[7]), int(str(row[8])))
