"""``relaystate recover`` and ``relaystate compact``: what an operator runs (admin scope)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from .options import Options, app_parser, scope_for


def register(commands: Any) -> None:
    p = commands.add_parser(
        "recover",
        parents=[app_parser()],
        help="Reconcile Actions whose holder is gone and continue their Tasks.",
    )
    p.set_defaults(run=recover)
    p = commands.add_parser(
        "compact", parents=[app_parser()], help="Fold old journal entries into baselines."
    )
    p.add_argument(
        "--retention-days",
        type=_retention_days,
        default=7.0,
        help=f"Keep this many days of journal entries (0 to {MAX_RETENTION_DAYS:,}).",
    )
    p.set_defaults(run=compact)


MAX_RETENTION_DAYS = 365_000
"""About a thousand years: more would put the cutoff before the first date Python knows."""


def _retention_days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of days, not {text!r}") from None
    if not (math.isfinite(days) and 0 <= days <= MAX_RETENTION_DAYS):
        raise argparse.ArgumentTypeError(f"takes 0 to {MAX_RETENTION_DAYS:,} days, not {text}")
    return days


def recover(ns: argparse.Namespace) -> None:
    """Reconcile Actions whose lease expired (or whose process died) and continue their Tasks."""
    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        if opts.as_json or not sys.stderr.isatty():  # a bar is for people, not for logs
            report = rt.recover(scope_for(None))
        else:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(
                TextColumn("recovering"),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True),
            ) as bar:
                job = bar.add_task("recover", total=None)
                report = rt.recover(scope_for(None), on_task=lambda _t, _o: bar.advance(job))
    data = {
        "examined_actions": report.examined,
        "live_leases_skipped": report.skipped,
        "claimed_by_another_recoverer": report.claimed_elsewhere,
        "resumed": report.outcomes,
        "errors": report.errors,
    }
    if opts.as_json:
        opts.emit(data)
        return
    from rich.console import Console

    out = Console()
    out.print(
        f"Examined {report.examined} open Actions ({report.skipped} under a live lease, "
        f"{report.claimed_elsewhere} Tasks taken by another recoverer); "
        f"resumed {len(report.resumed)} Tasks, {len(report.errors)} errors."
    )
    for task_id, outcome in report.outcomes.items():
        out.print(f"  {task_id}: {outcome}")
    for task_id, message in report.errors.items():
        out.print(f"  {task_id}: error {message}", style="red")


def compact(ns: argparse.Namespace) -> None:
    """Fold journal entries older than the retention into baselines (replay still works)."""
    from datetime import timedelta

    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        folded = rt.compact(scope_for(None), retention=timedelta(days=ns.retention_days))
    if opts.as_json:
        opts.emit({"folded_entries": folded})
    else:
        print(f"Folded {folded} journal entries into baselines.")
