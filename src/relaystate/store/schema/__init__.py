"""Versioned schema migrations for the SQL backends, and the runner that applies them.

Each backend has a folder of ordered steps, ``<backend>/NNNN_name.sql``; a database records
the last step it applied as ``meta.schema_version``. :func:`upgrade` applies the pending
steps in order, each in its own transaction that first takes the backend's migration lock
and re-reads the version, so several processes starting at once apply every step exactly
once. A database newer than the steps this code ships is refused with
:class:`~relaystate.errors.SchemaTooNew`: old code never writes a schema it does not know.

The runner is driver-free; a backend supplies a :class:`Database` (see ``sqlite.py`` and
``postgres.py``). Steps are plain SQL run as written; the runner owns the ``meta`` table.
"""

from __future__ import annotations

import functools
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ...errors import SchemaTooNew

__all__ = ["Database", "SchemaStatus", "SchemaStep", "latest", "status", "steps", "upgrade"]

_STEP_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class SchemaStep:
    """One schema change: the version it brings the database to, and its SQL."""

    version: int
    name: str
    sql: str

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "name": self.name}


@dataclass(frozen=True)
class SchemaStatus:
    """Where a database's schema stands against the steps this code ships."""

    backend: str
    current: int
    latest: int
    pending: tuple[SchemaStep, ...]

    @property
    def up_to_date(self) -> bool:
        return self.current == self.latest

    @property
    def too_new(self) -> bool:
        return self.current > self.latest

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "current": self.current,
            "latest": self.latest,
            "up_to_date": self.up_to_date,
            "too_new": self.too_new,
            "pending": [s.to_dict() for s in self.pending],
        }


class Database(Protocol):
    """One connection to one database, as the runner needs it."""

    backend: str
    """The folder of steps: ``sqlite`` or ``postgres``."""
    where: str
    """The database, for messages (no password)."""

    def applied_version(self) -> int:
        """The recorded schema version, read without locking; 0 for a database never set up."""

    def locked(self) -> AbstractContextManager[int]:
        """A transaction holding the migration lock; yields the version read under it.

        Commits when the block ends normally and rolls back when it raises.
        """

    def apply(self, step: SchemaStep) -> None:
        """Run ``step`` inside the transaction of :meth:`locked` and record its version."""


@functools.cache
def steps(backend: str) -> tuple[SchemaStep, ...]:
    """The backend's migration steps in version order (versions 1, 2, ... without gaps)."""
    found = []
    for entry in (Path(__file__).parent / backend).iterdir():
        match = _STEP_FILE.match(entry.name)
        if match:
            found.append(SchemaStep(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda s: s.version)
    if [s.version for s in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration steps for {backend} are not numbered 1..n: {found}")
    return tuple(found)


def latest(backend: str) -> int:
    return len(steps(backend))


def status(db: Database) -> SchemaStatus:
    """The database's schema version against the latest one, without changing anything."""
    current = db.applied_version()
    known = steps(db.backend)
    return SchemaStatus(db.backend, current, len(known), known[current:])


def refuse_if_too_new(db: Database, current: int) -> None:
    known = latest(db.backend)
    if current > known:
        raise SchemaTooNew(
            f"{db.where} has database schema {current}, newer than this relaystate "
            f"understands ({known}); upgrade relaystate"
        )


def upgrade(db: Database) -> list[SchemaStep]:
    """Apply the pending steps in order, one transaction each; returns those applied here.

    Safe to run from many processes at once: each step re-reads the version under the lock,
    so a step another process applied meanwhile is skipped, never run twice.
    """
    current = db.applied_version()
    refuse_if_too_new(db, current)
    applied: list[SchemaStep] = []
    for step in steps(db.backend)[current:]:
        with db.locked() as current:
            refuse_if_too_new(db, current)
            if current >= step.version:
                continue
            db.apply(step)
        applied.append(step)
    return applied
