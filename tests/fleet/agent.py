"""The torture run's agent, a user's own: a payment whose slow, non-idempotent Action runs on
workers of other hosts, reconciled with the payment service before any retry.

``relaystate serve|worker --app tests.fleet.agent:templates`` (``PAYMENTS`` names the
service's file, ``PAY_SECONDS`` how long its answer takes).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from relaystate import (
    ActionContext,
    Outcome,
    Retry,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    user_confirmed,
)

RECIPIENTS = ["alice", "bob", "carol", "dave"]


class Payments:
    """A stand-in payment service in a SQLite file. A payment takes effect the moment the
    request arrives; its answer comes ``seconds`` later (a slow network): a caller killed,
    cut off or timed out meanwhile does not know. Not idempotent: every request is a new
    payment, so a retry without asking first (``find``) pays twice."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.path, self.seconds = path, seconds

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, key TEXT NOT NULL,"
            " amount INTEGER NOT NULL, recipient TEXT NOT NULL, host TEXT NOT NULL)"
        )
        return db

    def pay(self, key: str, amount: int, recipient: str) -> str:
        db = self._db()
        try:
            cur = db.execute(
                "INSERT INTO payments (key, amount, recipient, host) VALUES (?, ?, ?, ?)",
                (key, amount, recipient, os.uname().nodename),
            )
            ref = f"PAY-{cur.lastrowid:06d}"
        finally:
            db.close()
        time.sleep(self.seconds)
        return ref

    def find(self, key: str) -> str | None:
        db = self._db()
        try:
            row = db.execute("SELECT min(id) FROM payments WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        return None if row is None or row[0] is None else f"PAY-{row[0]:06d}"

    def by_key(self) -> dict[str, int]:
        """How many payments each key made (exactly once: 1)."""
        if not self.path.exists():
            return {}
        db = self._db()
        try:
            return dict(db.execute("SELECT key, count(*) FROM payments GROUP BY key").fetchall())
        finally:
            db.close()


def payment(service: Payments) -> TaskTemplate:
    """collecting (amount, recipient) -> confirming -> paying (slow, on a worker) -> done."""
    template = TaskTemplate(
        "payment",
        titles={"en": "payment"},
        triggers={"en": ["pay", "send money", "a payment"]},
        slots=[
            Slot("amount", kind="number", ask={"en": "How much?"}),
            Slot("recipient", choices=RECIPIENTS, ask={"en": "To whom?"}),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("paying", actions=["pay"]),
            Stage("done"),
        ],
    )

    @template.action(
        side_effect=True,
        idempotent=False,
        retry=Retry(max_attempts=5, initial_interval=0.5, max_interval=2),
    )
    def pay(ctx: ActionContext) -> dict[str, Any]:
        amount = ctx.input["amount"]
        value = amount["value"] if isinstance(amount, dict) else amount
        ref = service.pay(ctx.idempotency_key, int(float(value)), str(ctx.input["recipient"]))
        return {"ref": ref}

    @pay.check
    def paid(ctx: ActionContext) -> Outcome:
        ref = service.find(ctx.idempotency_key)
        return Outcome.not_found() if ref is None else Outcome.succeeded({"ref": ref})

    return template


def templates() -> list[TaskTemplate]:
    """What ``--app tests.fleet.agent:templates`` loads."""
    seconds = float(os.environ.get("PAY_SECONDS", "1.5"))
    return [payment(Payments(Path(os.environ.get("PAYMENTS", "payments.db")), seconds))]
