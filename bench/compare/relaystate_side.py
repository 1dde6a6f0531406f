"""relaystate's side of ``make bench-compare`` (and the physical limit's), run in the
project's own environment.

- ``grow``: a turn is ``Runtime.fill`` of one slot with the user's line and the reply as
  Session messages (one write transaction: task row, journal delta, messages); ``--raw``:
  one row of the same bytes appended per transaction with the same durability (SQLite WAL +
  ``synchronous=FULL``; a PostgreSQL commit), the floor of any durable turn.
- ``resume``: a fresh process opens the store and reads the Task (``Runtime.task``) and the
  step it is at: what a restarted agent does.
- ``effects``: a Task whose two Actions each write a payment to a ledger (record before
  effect, journaled), run to done; ``--raw``: the two ledger writes alone.
- ``crash`` / ``recover``: the same payment, SIGKILLed right after its effect
  (``after_effect`` failpoint); a new process recovers the Task (it asks the ledger first).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from common import mark_line, payload, written

from relaystate import (
    ActionContext,
    Outcome,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
)

USER = Scope.user("bench")
LEASE = timedelta(seconds=1)
"""The crash scenario's Action lease: a recovering process waits it out, as any would."""
SESSION = "bench-session"


def chat_template() -> TaskTemplate:
    """Accepts turns forever: ``note`` optional, ``never`` never given."""
    return TaskTemplate(
        "endless_chat",
        goal="Keep talking",
        slots=[Slot("note", required=False), Slot("never", ask={"en": "Never answered."})],
        stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
    )


class Raw:
    """One row per transaction, the same durability: what a turn cannot beat."""

    def __init__(self, store: str) -> None:
        self.pg = store.startswith("postgres")
        if self.pg:
            import psycopg

            self.conn: Any = psycopg.connect(store, autocommit=True)
            self.conn.execute("CREATE TABLE IF NOT EXISTS raw (n bigserial PRIMARY KEY, b text)")
        else:
            self.conn = sqlite3.connect(store.removeprefix("sqlite:///"), isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("CREATE TABLE IF NOT EXISTS raw (n INTEGER PRIMARY KEY, b TEXT)")

    def append(self, text: str) -> None:
        if self.pg:
            self.conn.execute("INSERT INTO raw (b) VALUES (%s)", (text,))
        else:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT INTO raw (b) VALUES (?)", (text,))
            self.conn.execute("COMMIT")


def grow(args: argparse.Namespace) -> None:
    if args.raw:
        raw = Raw(args.store)

        def turn(i: int) -> None:
            user, reply, note = payload(i)
            raw.append(user + reply + note)
    else:
        rt = Runtime(open_store(args.store), [chat_template()])
        user, reply, note = payload(0)
        state = rt.start(
            USER,
            "endless_chat",
            session_id=SESSION,
            slots={"note": note},
            messages=[("user", user), ("assistant", reply)],
        )
        task_id = state.task.id

        def turn(i: int) -> None:
            user, reply, note = payload(i)
            rt.fill(
                USER,
                task_id,
                {"note": note},
                session_id=SESSION,
                messages=[("user", user), ("assistant", reply)],
            )

    done = 1 if not args.raw else 0
    for mark in args.marks:
        while done < mark - args.window:
            turn(done)
            done += 1
        times, before = [], written(args.store)
        while done < mark:
            t0 = time.perf_counter()
            turn(done)
            times.append(time.perf_counter() - t0)
            done += 1
        print(mark_line(mark, times, before, args.store), flush=True)


def resume(args: argparse.Namespace) -> None:
    if args.store.startswith("postgres"):  # the driver's import is not the resume
        import relaystate.store.postgres.store  # noqa: F401
    t0 = time.perf_counter()
    rt = Runtime(open_store(args.store), [chat_template()])
    (task,) = rt.tasks(USER)
    state = rt.task(USER, task.id)
    step = rt.next_step(state)
    took = time.perf_counter() - t0
    assert step is not None
    print(json.dumps({"resume_ms": took * 1e3, "turns": state.task.version}))
    rt.close()


# -- side effects ----------------------------------------------------------------------------
def ledger_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, ref TEXT, kind TEXT,"
        " key TEXT UNIQUE)"
    )
    return db


def order_template(ledger: Path) -> TaskTemplate:
    """pay, then ship: each a durable effect at the ledger under the Action's key."""
    template = TaskTemplate(
        "order",
        slots=[Slot("order")],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("executing", actions=["pay", "ship"]),
            Stage("done"),
        ],
    )

    def effect(ctx: ActionContext, kind: str) -> dict[str, str]:
        with ledger_db(ledger) as db:
            db.execute(
                "INSERT INTO effects (ref, kind, key) VALUES (?, ?, ?)",
                (ctx.slots["order"], kind, ctx.idempotency_key),
            )
        return {"done": kind}

    @template.action(side_effect=True, idempotent=False)
    def pay(ctx: ActionContext) -> dict[str, str]:
        return effect(ctx, "payment")

    @pay.check
    def paid(ctx: ActionContext) -> Outcome:
        with ledger_db(ledger) as db:
            row = db.execute("SELECT 1 FROM effects WHERE key = ?", (ctx.idempotency_key,))
            return Outcome.succeeded({"done": "payment"}) if row.fetchone() else Outcome.not_found()

    @template.action(side_effect=True, idempotent=True)
    def ship(ctx: ActionContext) -> dict[str, str]:
        return effect(ctx, "shipment")

    return template


def effects(args: argparse.Namespace) -> None:
    ledger = Path(args.ledger)
    times = []
    if args.raw:
        db = ledger_db(ledger)
        for n in range(args.runs):
            t0 = time.perf_counter()
            for kind in ("payment", "shipment"):
                db.execute("INSERT INTO effects (ref, kind) VALUES (?, ?)", (f"raw-{n}", kind))
            times.append(time.perf_counter() - t0)
    else:
        rt = Runtime(open_store(args.store), [order_template(ledger)])
        for n in range(args.runs):
            t0 = time.perf_counter()
            state = rt.start(USER, "order", slots={"order": f"o-{n}"})
            times.append(time.perf_counter() - t0)
            assert state.task.stage == "done", state.task.status_text
    times.sort()
    print(json.dumps({"workflow_ms": times[len(times) // 2] * 1e3, "runs": args.runs}))


def crash(args: argparse.Namespace) -> None:
    os.environ["RELAYSTATE_FAILPOINTS"] = "after_effect:pay=crash"
    rt = Runtime(open_store(args.store), [order_template(Path(args.ledger))], lease=LEASE)
    rt.start(USER, "order", slots={"order": args.order})


def recover(args: argparse.Namespace) -> None:
    rt = Runtime(open_store(args.store), [order_template(Path(args.ledger))], lease=LEASE)
    time.sleep(LEASE.total_seconds() + 0.1)  # the dead process's lease runs out first
    rt.recover(Scope.admin("bench"))
    (task,) = [t for t in rt.tasks(USER) if t.slots.get("order") == args.order]
    print(json.dumps({"done": task.stage == "done", "status": str(task.status)}))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grow")
    g.add_argument("--store", required=True)
    g.add_argument("--marks", type=lambda s: [int(x) for x in s.split(",")], required=True)
    g.add_argument("--window", type=int, default=50)
    g.add_argument("--raw", action="store_true")
    r = sub.add_parser("resume")
    r.add_argument("--store", required=True)
    e = sub.add_parser("effects")
    e.add_argument("--store", required=True)
    e.add_argument("--ledger", required=True)
    e.add_argument("--runs", type=int, default=50)
    e.add_argument("--raw", action="store_true")
    for name in ("crash", "recover"):
        c = sub.add_parser(name)
        c.add_argument("--store", required=True)
        c.add_argument("--ledger", required=True)
        c.add_argument("--order", required=True)
    args = p.parse_args()
    {"grow": grow, "resume": resume, "effects": effects, "crash": crash, "recover": recover}[
        args.cmd
    ](args)


if __name__ == "__main__":
    sys.exit(main())
