"""DBOS's side of ``make bench-compare``, in the comparison's own environment.

- ``effects``: a workflow of two ``@DBOS.step`` functions, each writing to the same ledger
  relaystate's Actions write to (DBOS checkpoints each step's result in its system
  database: SQLite or PostgreSQL, as relaystate's store).
- ``crash`` / ``recover``: the payment step is SIGKILLed right after its effect, before DBOS
  records the step; a new process launches DBOS, which recovers the pending workflow and
  runs the step again (steps are at-least-once).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from common import ledger_append
from dbos import DBOS, DBOSConfig, SetWorkflowID

LEDGER = Path("ledger.db")
"""Set from ``--ledger`` before DBOS launches."""
CRASH = False


@DBOS.step()
def pay(order: str) -> str:
    ledger_append(LEDGER, order, "payment")
    if CRASH:  # dies after the effect, before DBOS records the step's output
        os.kill(os.getpid(), signal.SIGKILL)
    return "paid"


@DBOS.step()
def ship(order: str) -> str:
    ledger_append(LEDGER, order, "shipment")
    return "shipped"


@DBOS.workflow()
def order_workflow(order: str) -> str:
    pay(order)
    return ship(order)


def launch(store: str) -> None:
    """DBOS over ``store`` as its system database (SQLite or PostgreSQL)."""
    config: DBOSConfig = {"name": "bench-compare", "system_database_url": store}
    DBOS(config=config)
    DBOS.launch()


def effects(args: argparse.Namespace) -> None:
    launch(args.store)
    times = []
    for n in range(args.runs):
        t0 = time.perf_counter()
        with SetWorkflowID(f"o-{n}-{time.time_ns()}"):
            order_workflow(f"o-{n}")
        times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"workflow_ms": times[len(times) // 2] * 1e3, "runs": args.runs}))
    DBOS.destroy()


def crash(args: argparse.Namespace) -> None:
    launch(args.store)
    with SetWorkflowID(args.order):
        order_workflow(args.order)


def recover(args: argparse.Namespace) -> None:
    launch(args.store)  # recovers pending workflows of this executor at launch
    handle = DBOS.retrieve_workflow(args.order)
    result = handle.get_result()
    print(json.dumps({"done": result == "shipped"}))
    DBOS.destroy()


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("effects")
    e.add_argument("--store", required=True)
    e.add_argument("--ledger", required=True)
    e.add_argument("--runs", type=int, default=50)
    for name in ("crash", "recover"):
        c = sub.add_parser(name)
        c.add_argument("--store", required=True)
        c.add_argument("--ledger", required=True)
        c.add_argument("--order", required=True)
    args = p.parse_args()
    global LEDGER, CRASH
    LEDGER, CRASH = Path(args.ledger), args.cmd == "crash"
    {"effects": effects, "crash": crash, "recover": recover}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
