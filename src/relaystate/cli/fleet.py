"""``relaystate worker`` (takes queued work), ``workers``, ``builds`` and ``migrate``: what an
operator runs to deploy a new build while users are mid-task."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from . import durability
from .options import Options, app_parser, scope_for, seconds, store_parser


def register(commands: Any) -> None:
    p = commands.add_parser(
        "worker",
        parents=[app_parser()],
        help="Run queued Actions of this build until SIGTERM, then drain and exit.",
    )
    p.add_argument(
        "--lease", type=seconds(0.1, 86_400), default=30.0, help="Seconds a claim lasts (30)."
    )
    p.add_argument(
        "--grace",
        type=seconds(0.1, 86_400),
        default=30.0,
        help="Seconds to finish on SIGTERM (30).",
    )
    p.add_argument("--batch", type=_count, default=1, help="Items one claim takes (1).")
    p.add_argument(
        "--concurrency", type=_count, default=4, help="Tasks driven at once (4 threads)."
    )
    p.set_defaults(run=worker)
    p = commands.add_parser(
        "workers", parents=[store_parser()], help="Processes in service: build, role, claims."
    )
    p.add_argument("--all", action="store_true", help="Stopped ones too.")
    p.set_defaults(run=workers)
    p = commands.add_parser(
        "builds",
        parents=[store_parser()],
        help="Builds in service and the open Tasks pinned to each (when may an old one go).",
    )
    p.set_defaults(run=builds)
    p = commands.add_parser(
        "migrate",
        parents=[app_parser()],
        help="Lift every stored Task to the template versions of this build.",
    )
    p.add_argument("--dry-run", action="store_true", help="Run the migrations, write nothing.")
    p.set_defaults(run=migrate)


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"takes 1 to 1000, not {text!r}")
    return int(text)


def worker(ns: argparse.Namespace) -> None:
    """Claim and drive queued work until SIGTERM; then stop claiming, finish the Task in
    hand within the grace period, release, deregister, exit 0."""
    import logging

    from ..workers.worker import Worker, run_until_signalled

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    opts = Options.parse(ns)
    # the Actions it takes are leased as long as its claims: a worker that dies on another
    # host is taken over once --lease has passed (on this host, at once)
    with opts.runtime(create=False, lease=timedelta(seconds=ns.lease)) as rt:
        said = sys.stderr
        durability.warn(rt)

        def on_item(item: Any, outcome: str) -> None:
            if not opts.as_json:
                print(
                    f"{item.task_id} ({item.type} v{item.template_version}): {outcome}", file=said
                )

        w = Worker(
            rt,
            lease=timedelta(seconds=ns.lease),
            batch=ns.batch,
            concurrency=ns.concurrency,
            on_item=on_item,
        )
        print(f"relaystate worker {w.id} build {rt.build}: waiting for work", file=said, flush=True)
        report, drained = run_until_signalled(w, grace=ns.grace)
    summary = {
        "worker": w.id,
        "build": rt.build,
        "done": report.done,
        "errors": report.errors,
        "released": report.released,
        "drained": drained,
    }
    if opts.as_json:
        opts.emit(summary)
    else:
        state = "drained" if drained else "stopped after the grace period"
        print(f"relaystate worker {state}: {report.done} Tasks driven, {report.errors} errors")


def workers(ns: argparse.Namespace) -> None:
    from ..runtime.views import worker_view

    opts = Options.parse(ns)
    with opts.runtime(create=False, templates=False) as rt:
        now = rt.clock()
        rows = [worker_view(w, now) for w in rt.workers(scope_for(None), include_stopped=ns.all)]
    if opts.as_json:
        opts.emit(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "role", "build", "claimed", "heartbeat age", "stopped")
    for r in rows:
        age = "-" if r["heartbeat_age_s"] is None else f"{r['heartbeat_age_s']} s"
        table.add_row(r["id"], r["role"], r["build"], str(r["claimed"]), age, r["stopped_at"] or "")
    Console().print(table if rows else "No workers registered.")


def builds(ns: argparse.Namespace) -> None:
    from ..runtime.views import build_view

    opts = Options.parse(ns)
    with opts.runtime(create=False, templates=False) as rt:
        rows = [build_view(b) for b in rt.builds(scope_for(None))]
    if opts.as_json:
        opts.emit(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("build", "processes", "pinned open Tasks", "open Tasks started", "can retire")
    for r in rows:
        procs = ", ".join(f"{n} {role}" for role, n in r["processes"].items()) or "none"
        table.add_row(
            r["build"],
            procs,
            str(r["pinned_open_tasks"]),
            str(r["open_tasks_started"]),
            "yes" if r["can_retire"] else "no",
        )
    Console().print(table if rows else "No builds in service and no open Tasks.")


def migrate(ns: argparse.Namespace) -> None:
    """Lift every Task that is behind; print a count per type and version."""
    opts = Options.parse(ns)
    with opts.runtime(create=False) as rt:
        if opts.as_json or not sys.stderr.isatty():
            report = rt.migrate(scope_for(None), dry_run=ns.dry_run)
        else:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(
                TextColumn("migrating" if not ns.dry_run else "checking"),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True),
            ) as bar:
                job = bar.add_task("migrate", total=None)
                report = rt.migrate(
                    scope_for(None), dry_run=ns.dry_run, on_task=lambda _t, _o: bar.advance(job)
                )
        top = {t: tpl.version for t, tpl in rt.versions.newest.items()}
    keys = sorted(
        set(report.lifted) | set(report.failed) | set(report.skipped) | set(report.deferred)
    )
    rows = [
        {
            "type": t,
            "from_version": v,
            "to_version": top.get(t),
            "lifted": report.lifted[(t, v)],
            "failed": report.failed[(t, v)],
            "skipped": report.skipped[(t, v)],
            "deferred": report.deferred[(t, v)],
            "reason": report.reasons.get((t, v)),
        }
        for t, v in keys
    ]
    if opts.as_json:
        opts.emit(
            {
                "dry_run": ns.dry_run,
                "examined": report.examined,
                "current": report.current,
                "by_version": rows,
            }
        )
    else:
        verb = "would lift" if ns.dry_run else "lifted"
        print(f"Examined {report.examined} Tasks ({report.current} already current).")
        for r in rows:
            line = (
                f"  {r['type']} v{r['from_version']} -> v{r['to_version']}: {verb} {r['lifted']}, "
                f"failed {r['failed']}, skipped {r['skipped']} (pinned or no migration), "
                f"deferred {r['deferred']} (an Action in flight: lifted once it settles)"
            )
            print(line + (f"; first failure: {r['reason']}" if r["reason"] else ""))
    if report.failed:
        sys.exit(1)
