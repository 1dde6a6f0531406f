"""Demo agents and their downstream ledger."""

from __future__ import annotations

from pathlib import Path

from ..templates import TaskTemplate
from .flights import flight_booking
from .ledger import Ledger

__all__ = ["Ledger", "flight_booking", "templates"]


def templates(ledger_path: str | Path) -> list[TaskTemplate]:
    """The demo task types, sending their side effects to the ledger at ``ledger_path``."""
    ledger = Ledger(ledger_path)
    return [flight_booking(ledger)]
