"""A tiny agent process for the crash tests in ``test_crash.py``.

The tests start it with ``sys.executable`` and kill it through failpoints
(``RELAYSTATE_FAILPOINTS``), then start it again to recover. Subcommands:

``run``      start a payment task (one slot first, the other in a later turn), confirm it
             and run its actions. Prints one JSON line when it starts (its lease owner id)
             and one when it finishes; a process killed at a failpoint prints only the first.
``recover``  open the store as a new process, note the open actions and their leases, run
             ``Runtime.recover()`` and print one JSON line with what it found and did.
``resume``   ``Runtime.resume(task_id)`` (what another worker or the user's next turn does);
             prints the task status and the next step.

Every side-effecting action sends a request to the downstream ledger (its own SQLite file)
with the action's idempotency key. How an action is declared comes from ``--decl``:

=================  ============  ==========  ===================================
``--decl``         idempotent    check       downstream
=================  ============  ==========  ===================================
idem_check         yes           yes         deduplicates by key
idem_nocheck       yes           no          deduplicates by key
nonidem_check      no            yes         a new effect per request
nonidem_nocheck    no            no          a new effect per request
=================  ============  ==========  ===================================

``--shape single`` runs ``quote -> charge -> receipt`` (one side effect between two
read-only steps); ``--shape sequence`` runs ``quote -> charge -> ship`` (two side effects).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

from relaystate import (
    ActionContext,
    Outcome,
    Retry,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
    user_confirmed,
)
from relaystate.demo.ledger import Ledger
from relaystate.model import utcnow

ADMIN = Scope.admin("test")

USER = "alice"
DECLARATIONS = {
    "idem_check": (True, True),
    "idem_nocheck": (True, False),
    "nonidem_check": (False, True),
    "nonidem_nocheck": (False, False),
}
SHAPES = {
    "single": ["quote", "charge", "receipt"],
    "sequence": ["quote", "charge", "ship"],
}


def payment(ledger: Ledger, decl: str, shape: str) -> TaskTemplate:
    idempotent, checkable = DECLARATIONS[decl]
    template = TaskTemplate(
        "payment",
        version=1,
        goal="Pay a payee and confirm it",
        slots=[Slot("amount", kind="number"), Slot("payee")],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("executing", actions=SHAPES[shape]),
            Stage("done"),
        ],
    )
    retry = Retry(max_attempts=3, initial_interval=0.05)

    @template.action
    def quote(ctx: ActionContext) -> dict[str, Any]:
        """Read-only and deterministic."""
        return {"fee": round(float(ctx.slots["amount"]) * 0.01, 2)}

    def side_effect(name: str, kind: str, make_input: Any) -> None:
        def fn(ctx: ActionContext) -> dict[str, Any]:
            return ledger.apply(ctx.idempotency_key, kind, dict(ctx.input), deduplicate=idempotent)

        spec = template.action(
            name=name, side_effect=True, idempotent=idempotent, retry=retry, input=make_input
        )(fn)
        if checkable:

            @spec.check
            def status(ctx: ActionContext) -> Outcome:
                effect = ledger.status(ctx.idempotency_key)
                return Outcome.not_found() if effect is None else Outcome.succeeded(effect)

    side_effect(
        "charge",
        "charge",
        lambda task, outputs: {**task.slots, "fee": outputs["quote"]["fee"]},
    )
    if shape == "single":

        @template.action
        def receipt(ctx: ActionContext) -> dict[str, Any]:
            """Read-only: what the user is told, built from the charge's recorded output."""
            return {"charge_id": ctx.outputs["charge"]["id"], "payee": ctx.slots["payee"]}

    else:
        side_effect(
            "ship",
            "shipment",
            lambda task, outputs: {"charge_id": outputs["charge"]["id"], "to": task.slots["payee"]},
        )
    return template


def _runtime(args: argparse.Namespace) -> Runtime:
    ledger = Ledger(args.ledger)
    return Runtime(
        open_store(args.store),
        [payment(ledger, args.decl, args.shape)],
        lease=timedelta(seconds=args.lease),
    )


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


def run(args: argparse.Namespace) -> None:
    rt = _runtime(args)
    _emit(event="started", owner=rt.owner, pid=os.getpid())
    rt.start(Scope.user(USER), "payment", task_id=args.task_id, slots={"amount": 120})
    rt.fill(Scope.user(USER), args.task_id, {"payee": "ACME Ltd"})
    state = rt.confirm(
        Scope.user(USER), args.task_id
    )  # runs the actions; a failpoint may kill us here
    _emit(event="finished", status=str(state.task.status), version=state.task.version)
    rt.close()


def recover(args: argparse.Namespace) -> None:
    rt = _runtime(args)
    now = utcnow()
    open_actions = [
        {
            "task_id": a.task_id,
            "name": a.name,
            "status": str(a.status),
            "lease_owner": a.lease_owner,
            "lease_left": (
                None if a.lease_expires_at is None else (a.lease_expires_at - now).total_seconds()
            ),
        }
        for a in rt.stores.tasks.open_actions()
    ]
    began = time.monotonic()
    report = rt.recover(ADMIN)
    elapsed = time.monotonic() - began
    _emit(
        owner=rt.owner,
        open_actions=open_actions,
        elapsed=elapsed,
        examined=report.examined,
        skipped=report.skipped,
        resumed=report.resumed,
        outcomes=report.outcomes,
        errors=report.errors,
    )
    rt.close()


def resume(args: argparse.Namespace) -> None:
    rt = _runtime(args)
    began = time.monotonic()
    resumption = rt.resume(ADMIN, args.task_id)
    _emit(
        owner=rt.owner,
        elapsed=time.monotonic() - began,
        status=str(resumption.task.status),
        step=type(resumption.step).__name__,
    )
    rt.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "recover", "resume"])
    parser.add_argument("--store", required=True, help="store URL, e.g. sqlite:////tmp/x.db")
    parser.add_argument("--ledger", required=True, help="path of the downstream ledger file")
    parser.add_argument("--decl", choices=sorted(DECLARATIONS), default="idem_check")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="single")
    parser.add_argument("--task-id", default="task-1")
    parser.add_argument("--lease", type=float, default=300.0, help="lease length in seconds")
    args = parser.parse_args(argv)
    {"run": run, "recover": recover, "resume": resume}[args.command](args)


if __name__ == "__main__":
    main()
