"""A long-running Task whose slow Action runs on a worker, and survives the worker's death.

An export of a data set takes a while in the (stand-in) job service. The server only commits
the user's yes (``relaystate serve --execute queue``); a worker process (``relaystate
worker``) takes the queued work. When a worker dies mid-export, the next one does not start a
second export: it asks the job service what happened to the first (the Action's ``check``),
waits while it runs, and takes its result.

    relaystate worker --app examples.long_running.agent:templates     # from the repo root
"""

from __future__ import annotations

import json
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

SECONDS = float(os.environ.get("EXPORT_SECONDS", "4"))
"""How long one export takes in the job service."""


class Jobs:
    """A stand-in job service in a SQLite file: a job per idempotency key (starting it again
    with the same key is the same job), done ``seconds`` after it started, whoever waits."""

    def __init__(self, path: Path, seconds: float = SECONDS) -> None:
        self.path, self.seconds = path, seconds

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (key TEXT PRIMARY KEY, id TEXT NOT NULL,"
            " started REAL NOT NULL, spec TEXT NOT NULL)"
        )
        return db

    def start(self, key: str, spec: dict[str, Any]) -> str:
        db = self._db()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id FROM jobs WHERE key = ?", (key,)).fetchone()
            if row is None:
                count = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
                row = (f"JOB-{count + 1:05d}",)
                db.execute(
                    "INSERT INTO jobs VALUES (?, ?, ?, ?)",
                    (key, row[0], time.time(), json.dumps(spec)),
                )
            db.execute("COMMIT")
            return str(row[0])
        finally:
            db.close()

    def status(self, key: str) -> dict[str, Any] | None:
        """None: no such job; else its state, "running" or "done" (with its result)."""
        db = self._db()
        try:
            row = db.execute("SELECT id, started FROM jobs WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        if row is None:
            return None
        job, started = row
        if time.time() - started < self.seconds:
            return {"job": job, "state": "running"}
        return {"job": job, "state": "done", "file": f"exports/{job}.csv"}

    def started(self) -> int:
        """How many jobs were ever started (one per export, however many workers tried)."""
        db = self._db()
        try:
            return int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        finally:
            db.close()


def data_export(jobs: Jobs) -> TaskTemplate:
    """collecting (data set, format) -> confirming -> exporting (slow) -> done."""
    template = TaskTemplate(
        "data_export",
        titles={"en": "data export", "zh": "数据导出"},
        triggers={"en": ["export", "an export"], "zh": ["导出"]},
        slots=[
            Slot("dataset", choices=["sales", "support", "traffic"], ask={"en": "Which data?"}),
            Slot("format", choices=["csv", "json"], ask={"en": "CSV or JSON?"}),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("exporting", actions=["export"]),
            Stage("done"),
        ],
    )

    @template.action(
        side_effect=True,
        idempotent=True,
        retry=Retry(max_attempts=3, initial_interval=0.5, max_interval=2),
    )
    def export(ctx: ActionContext) -> dict[str, Any]:
        jobs.start(ctx.idempotency_key, dict(ctx.input))  # the same key: the same job
        while True:
            found = jobs.status(ctx.idempotency_key)
            if found is not None and found["state"] == "done":
                return found
            time.sleep(0.1)  # slow work: a worker may die here, with the job running

    @export.check
    def export_status(ctx: ActionContext) -> Outcome:
        # after a worker died: did the export start, is it still running, is it done?
        found = jobs.status(ctx.idempotency_key)
        if found is None:
            return Outcome.not_found()  # never started: safe to start it
        if found["state"] == "running":
            return Outcome.pending(f"{found['job']} is still running")
        return Outcome.succeeded(found)

    return template


def templates() -> list[TaskTemplate]:
    """What ``--app examples.long_running.agent:templates`` loads."""
    return [data_export(Jobs(Path(os.environ.get("EXPORT_JOBS", "export-jobs.db"))))]
