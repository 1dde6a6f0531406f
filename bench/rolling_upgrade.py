"""A rolling upgrade under load, measured (issue 12): what users notice while build v1 is
replaced by build v2, how long each process takes to go, how long work waits in the queue
during the handover, and how fast ``relaystate migrate`` lifts stored Tasks.

Run: ``python bench/rolling_upgrade.py`` (20 users, 5,000 Tasks to migrate), ``--quick``
(10 users, shorter phases, 1,000 Tasks), ``--users N``, ``--migrate-tasks N``, ``--json
PATH`` to keep the numbers. Needs PostgreSQL's binaries and nginx (tests/services.py starts
both, throwaway). A benchmark, not a test, but it exits 1 if a request failed, a Task was
left open or an effect was made twice.

The scenario is the rolling-upgrade test's (tests/upgrade/scenario.py): nginx (the sample
deploy/nginx/relaystate.conf) in front of two ``relaystate serve --execute queue`` processes
of build v1, two v1 workers; N users each talking through a trip booking (``auto``) and a
refund (``pinned``) in a loop; two v2 API processes and two v2 workers start and join nginx;
the v1 API processes get SIGTERM one by one; the v1 workers once ``relaystate builds`` says
no open Task is pinned to v1; the load ends.

- Requests: every request the users made, and those sent while the upgrade ran (from the v2
  processes' start to the v1 workers' exit), failed = any answer that is not a 2xx or a
  connection error; nginx's log says how many it sent to a second process, and why.
- Stop: seconds from SIGTERM to the process's exit, and its exit status.
- Queue wait: from a Task's journal, the time from the commit that made its action due
  (``due_at``, the user's confirmation) to the worker's commit that started the action;
  all Tasks, and those whose action fell due during the handover.
- Bulk migration: N version-1 trips created through the Python API on PostgreSQL (filled,
  waiting for confirmation), then ``relaystate migrate --app tests.upgrade.app_v2:templates``
  (a subprocess, as an operator runs it): Tasks/s over its wall time, and over its wall time
  less the command's start-up (the same command on an empty store); ``--dry-run`` too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchlib import ROOT, facts_line, machine_facts, make_console, pct, pg_create, write_json
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from tests import services
from tests.upgrade import app_v1, evidence
from tests.upgrade.fleet import APPS
from tests.upgrade.scenario import Upgrade, rolling_upgrade

SLOTS = {"destination": "Lisbon", "passenger_name": "Ada Lovelace", "bags": 1}


def ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:.0f} ms"


def upgrade_numbers(up: Upgrade) -> dict[str, Any]:
    """What the finished upgrade says, read from the users' records, nginx's log, the
    ledger and the store's journal."""
    load, marks = up.load, up.marks
    begin, end = marks["v2 starting"], marks["v1 gone"]
    window = load.during(begin, end)
    lat = [r.seconds for r in load.requests]
    lat_window = [r.seconds for r in window]
    retried = [p for p in up.proxied if p.retried]
    stores = open_store(up.fleet.store)
    try:
        states = evidence.tasks(stores)
        waits = [evidence.queue_wait(evidence.journal(stores, s.task.id)) for s in states]
    finally:
        stores.close()
    found = [w for w in waits if w is not None]
    handover = [w for w in found if begin <= w.due.timestamp() < end]
    before = [w.seconds for w in found if w.due.timestamp() < begin]
    after = [w.seconds for w in found if w.due.timestamp() >= end]
    effects = evidence.effects(up.fleet.ledger)
    made_by = {e["task_id"]: e["build"] for e in effects}
    crossed = [
        s
        for s in states
        if s.task.type == "trip"
        and s.task.created_by_build == "v1"
        and made_by.get(s.task.id) == "v2"
    ]
    return {
        "requests": len(load.requests),
        "failed": len(load.failed()),
        "user_failures": load.failures,
        "requests_during_upgrade": len(window),
        "failed_during_upgrade": len(load.failed(begin, end)),
        "upgrade_seconds": end - begin,
        "latency_p50_s": pct(lat, 0.5),
        "latency_p95_s": pct(lat, 0.95),
        "latency_max_s": max(lat),
        "latency_upgrade_p50_s": pct(lat_window, 0.5) if lat_window else float("nan"),
        "latency_upgrade_p95_s": pct(lat_window, 0.95) if lat_window else float("nan"),
        "latency_upgrade_max_s": max(lat_window, default=float("nan")),
        "nginx_retried": len(retried),
        "nginx_retried_after_503": sum("503" in p.answers for p in retried),
        "nginx_retried_after_refused": sum("502" in p.answers for p in retried),
        "stop_seconds": up.stopped,
        "exit_codes": up.exit_codes,
        "tasks": len(states),
        "tasks_open": len(up.left_open),
        "tasks_by_type_build": {
            f"{t} {b}": n
            for (t, b), n in sorted(
                Counter((s.task.type, s.task.created_by_build) for s in states).items()
            )
        },
        "trips_started_v1_finished_v2": len(crossed),
        "effects": len(effects),
        "duplicate_effects": evidence.duplicates(effects),
        "queue_wait_n": len(found),
        "queue_wait_p50_s": pct([w.seconds for w in found], 0.5),
        "queue_wait_p95_s": pct([w.seconds for w in found], 0.95),
        "queue_wait_max_s": max(w.seconds for w in found),
        "handover_wait_n": len(handover),
        "handover_wait_p50_s": pct([w.seconds for w in handover], 0.5) if handover else None,
        "handover_wait_p95_s": pct([w.seconds for w in handover], 0.95) if handover else None,
        "handover_wait_max_s": max((w.seconds for w in handover), default=None),
        "before_wait_n": len(before),
        "before_wait_p50_s": pct(before, 0.5) if before else None,
        "before_wait_p95_s": pct(before, 0.95) if before else None,
        "after_wait_n": len(after),
        "after_wait_p50_s": pct(after, 0.5) if after else None,
        "after_wait_p95_s": pct(after, 0.95) if after else None,
        "migrate_after": up.migrate,
        "marks_s": {k: round(v - marks["load started"], 2) for k, v in marks.items()},
    }


def bulk_migration(server: str, tasks: int, console: Console) -> dict[str, Any]:
    """Create ``tasks`` version-1 trips, then time ``relaystate migrate`` (v2) over them."""
    url = pg_create(server, "bench_migrate")
    empty = pg_create(server, "bench_migrate_empty")
    with Runtime(open_store(url), app_v1.templates(), build="v1") as rt:
        started = time.perf_counter()

        def make(i: int) -> None:
            rt.start(Scope.user(f"u{i % 50}"), "trip", slots=SLOTS, run=False)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(tasks)))
        created = time.perf_counter() - started
    console.print(f"created {tasks} v1 trips in {created:.1f} s; migrating")
    with Runtime(open_store(empty), [], build="v1"):
        pass  # the schema, so the start-up run below does only what migrate always does

    def migrate(store: str, *extra: str) -> tuple[float, dict[str, Any]]:
        cmd = [sys.executable, "-m", "relaystate.cli", "migrate", "--store", store, "--json"]
        cmd += ["--app", APPS["v2"], "--build", "v2", *extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        began = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        return time.perf_counter() - began, json.loads(done.stdout)

    startup, _ = migrate(empty)
    dry, dry_report = migrate(url, "--dry-run")
    wall, report = migrate(url)
    lifted = sum(r["lifted"] for r in report["by_version"])
    checked = sum(r["lifted"] for r in dry_report["by_version"])
    return {
        "tasks": tasks,
        "create_seconds": created,
        "startup_seconds": startup,
        "dry_run_seconds": dry,
        "dry_run_checked": checked,
        "migrate_seconds": wall,
        "lifted": lifted,
        "failed": sum(r["failed"] for r in report["by_version"]),
        "tasks_per_s": lifted / wall,
        "tasks_per_s_less_startup": lifted / max(wall - startup, 1e-9),
        "dry_run_tasks_per_s": checked / max(dry - startup, 1e-9),
    }


def show(console: Console, n: dict[str, Any], m: dict[str, Any] | None) -> None:
    table = Table(title="Rolling upgrade v1 -> v2 under load", show_lines=False)
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("note")
    table.add_row("requests (all)", f"{n['requests']:,}", f"failed: {n['failed']}")
    table.add_row(
        "requests during the upgrade",
        f"{n['requests_during_upgrade']:,}",
        f"failed: {n['failed_during_upgrade']} (v2 start to v1 workers' exit, "
        f"{n['upgrade_seconds']:.1f} s)",
    )
    table.add_row(
        "latency p50 / p95 / max",
        f"{ms(n['latency_p50_s'])} / {ms(n['latency_p95_s'])} / {ms(n['latency_max_s'])}",
        "every request, through nginx",
    )
    table.add_row(
        "  during the upgrade",
        f"{ms(n['latency_upgrade_p50_s'])} / {ms(n['latency_upgrade_p95_s'])} / "
        f"{ms(n['latency_upgrade_max_s'])}",
        "",
    )
    table.add_row(
        "nginx sent to another process",
        str(n["nginx_retried"]),
        f"after 503 task_too_new: {n['nginx_retried_after_503']}, after a refused "
        f"connection: {n['nginx_retried_after_refused']}",
    )
    for name, took in n["stop_seconds"].items():
        code = n["exit_codes"].get(name)
        table.add_row(
            f"SIGTERM -> exit: {name}",
            "did not exit" if took is None else f"{took:.2f} s",
            f"exit status {code}" + (" (killed by the signal)" if code == -15 else ""),
        )
    table.add_row(
        "queue wait p50 / p95 / max",
        f"{ms(n['queue_wait_p50_s'])} / {ms(n['queue_wait_p95_s'])} / {ms(n['queue_wait_max_s'])}",
        f"{n['queue_wait_n']} Tasks: due (confirmed) -> a worker starts the action",
    )
    if n["before_wait_n"]:
        table.add_row(
            "  due before v2 started",
            f"{ms(n['before_wait_p50_s'])} / {ms(n['before_wait_p95_s'])}",
            f"{n['before_wait_n']} Tasks (p50 / p95): two v1 workers",
        )
    if n["handover_wait_n"]:
        table.add_row(
            "  due during the handover",
            f"{ms(n['handover_wait_p50_s'])} / {ms(n['handover_wait_p95_s'])} / "
            f"{ms(n['handover_wait_max_s'])}",
            f"{n['handover_wait_n']} Tasks (p50 / p95 / max): v1 and v2 workers, v1 draining",
        )
    if n["after_wait_n"]:
        table.add_row(
            "  due once v1 was gone",
            f"{ms(n['after_wait_p50_s'])} / {ms(n['after_wait_p95_s'])}",
            f"{n['after_wait_n']} Tasks (p50 / p95): two v2 workers",
        )
    table.add_row(
        "Tasks",
        str(n["tasks"]),
        f"open at the end: {n['tasks_open']}; "
        + ", ".join(f"{k}: {v}" for k, v in n["tasks_by_type_build"].items()),
    )
    table.add_row("trips started on v1, finished on v2", str(n["trips_started_v1_finished_v2"]), "")
    dupes = n["duplicate_effects"]
    table.add_row(
        "effects in the ledger",
        str(n["effects"]),
        f"duplicates: {len(dupes['keys'])} keys, {len(dupes['actions'])} actions",
    )
    if m is not None:
        table.add_row(
            "bulk migration (relaystate migrate)",
            f"{m['tasks_per_s']:.0f} Tasks/s",
            f"{m['lifted']:,} v1 trips in {m['migrate_seconds']:.1f} s wall; "
            f"{m['tasks_per_s_less_startup']:.0f}/s less the {m['startup_seconds']:.1f} s "
            f"start-up; failed {m['failed']}",
        )
        table.add_row(
            "  --dry-run",
            f"{m['dry_run_tasks_per_s']:.0f} Tasks/s",
            f"{m['dry_run_checked']:,} in {m['dry_run_seconds']:.1f} s (less start-up)",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 users, 1,000 Tasks to migrate.")
    parser.add_argument("--users", type=int, help="Users talking during the upgrade (20).")
    parser.add_argument("--migrate-tasks", type=int, help="Tasks to migrate in bulk (5,000).")
    parser.add_argument(
        "--action-seconds",
        default="0.3:1.5",
        help="LOW:HIGH seconds each side effect takes (0.3:1.5): two workers run about "
        "2 a second, so 20 users keep them busy; shorter ones show the handover alone.",
    )
    parser.add_argument("--json", dest="json_path", help="Write the numbers here.")
    args = parser.parse_args()
    users = args.users or (10 if args.quick else 20)
    tasks = args.migrate_tasks or (1_000 if args.quick else 5_000)
    phases = {"warm": 5.0, "overlap": 4.0, "after": 4.0} if args.quick else {}
    console = make_console()
    began = time.perf_counter()
    try:
        services.nginx_binary()
    except services.Unavailable as exc:
        console.print(f"[red]{exc}[/]")
        raise SystemExit(2) from None
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(services.postgres())
        facts = machine_facts(server)
        console.print(facts_line(facts))
        url = pg_create(server, "bench_rolling_upgrade")
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rolling-")))
        console.print(f"rolling upgrade: {users} users, actions of {args.action_seconds} s")
        with rolling_upgrade(
            url,
            base,
            users=users,
            action_seconds=args.action_seconds,
            say=lambda s: console.print(f"  {s}"),
            **phases,
        ) as up:
            numbers = upgrade_numbers(up)
        numbers["stop_seconds"], numbers["exit_codes"] = up.stopped, up.exit_codes
        console.print(f"bulk migration: {tasks:,} Tasks")
        migration = bulk_migration(server, tasks, console)
    show(console, numbers, migration)
    write_json(
        console,
        args.json_path,
        facts,
        {"upgrade": numbers, "migration": migration},
        time.perf_counter() - began,
    )
    bad = (
        numbers["failed"]
        or numbers["user_failures"]
        or numbers["tasks_open"]
        or numbers["duplicate_effects"]["keys"]
        or numbers["duplicate_effects"]["actions"]
        or migration["failed"]
    )
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
