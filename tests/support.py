"""Shared test helpers: a controllable clock, a small configurable task type, and the
command line run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
from relaystate.demo.ledger import Ledger


class Clock:
    """A clock the test moves; ``sleep`` advances it instead of waiting."""

    def __init__(self, start: datetime = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class Script:
    """What the test's downstream does on each call of an action, by name."""

    plans: dict[str, list[Callable[[ActionContext], Any]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def run(self, name: str, ctx: ActionContext, default: Callable[[], Any]) -> Any:
        self.calls.append(name)
        plan = self.plans.get(name)
        if plan:
            return plan.pop(0)(ctx)
        return default()


def order_template(
    ledger: Ledger,
    script: Script,
    *,
    pay_idempotent: bool = True,
    pay_check: bool = True,
    compensate: bool = True,
    retry: Retry | None = None,
    timeout: float | None = None,
) -> TaskTemplate:
    """collecting -> confirming -> executing(reserve, pay, notify) -> done."""
    template = TaskTemplate(
        "order",
        version=2,
        slots=[
            Slot("item"),
            Slot("size", choices=["S", "M", "L"], synonyms={"medium": "M"}),
            Slot("note", required=False),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("executing", actions=["reserve", "pay", "notify"]),
            Stage("done"),
        ],
    )
    policy = retry or Retry(max_attempts=3, initial_interval=1.0)

    @template.action(side_effect=True, idempotent=True, retry=policy)
    def reserve(ctx: ActionContext) -> Any:
        return script.run(
            "reserve", ctx, lambda: ledger.apply(ctx.idempotency_key, "reservation", {})
        )

    if compensate:

        @reserve.compensate
        def release(ctx: ActionContext) -> Any:
            return script.run(
                "reserve.compensate",
                ctx,
                lambda: ledger.apply(ctx.idempotency_key, "release", {"of": ctx.original_output}),
            )

    @template.action(side_effect=True, idempotent=pay_idempotent, retry=policy, timeout=timeout)
    def pay(ctx: ActionContext) -> Any:
        return script.run(
            "pay",
            ctx,
            lambda: ledger.apply(
                ctx.idempotency_key, "payment", dict(ctx.input), deduplicate=pay_idempotent
            ),
        )

    if compensate:

        @pay.compensate
        def refund(ctx: ActionContext) -> Any:
            return script.run(
                "pay.compensate",
                ctx,
                lambda: ledger.apply(ctx.idempotency_key, "refund", {"of": ctx.original_output}),
            )

    if pay_check:

        @pay.check
        def payment_status(ctx: ActionContext) -> Outcome:
            script.calls.append("pay.check")
            found = ledger.status(ctx.idempotency_key)
            return Outcome.succeeded(found) if found else Outcome.not_found()

    @template.action(retry=policy)
    def notify(ctx: ActionContext) -> Any:
        return script.run("notify", ctx, lambda: {"sent": True})

    return template


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``relaystate ARGS`` in a new process (wide columns, so rich does not wrap)."""
    return subprocess.run(
        [sys.executable, "-m", "relaystate.cli", *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
