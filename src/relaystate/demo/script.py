"""The scripted demo behind ``make demo``: the mission in five scenes, on embedded SQLite.

1. Alice starts a flight booking on her phone and leaves half-way.
2. She comes back on her laptop (a new session, a new process): the task is found by her
   user id and resumed from its stored stage and slots, not from the chat.
3. She confirms; the process creating the order is killed (SIGKILL) right after the
   downstream made the order, before relaystate could record the success.
4. A new process recovers: it asks the downstream (``check``) instead of ordering again.
5. The journal shows every change, and replays the task as it was at any version.
6. Memory: a chat about a second trip changes its mind twice; the Task's context for the next
   turn, cut to a token budget, holds the current values (and says what they replaced), and
   the conversation is found again by search.
7. A new build while Bob is mid-task: build v2 (flight bookings gain a seat) lifts his
   version-1 booking through its migration when he confirms, a v2 worker takes the order
   from the queue, and the old build now leaves the booking alone.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel

from ..model import TaskStatus
from ..render import history_table, print_state
from ..runtime.narrate import narrate, task_type
from ..runtime.runtime import Runtime
from ..scope import Scope
from ..store import open_store
from . import templates
from .ledger import Ledger


def _scene(out: Console, title: str, text: str) -> None:
    out.print()
    out.print(Panel(text, title=title, title_align="left", border_style="cyan"))


def run_demo(workdir: Path, out: Console, *, store: str | None = None) -> dict[str, Any]:
    """Play the scenes on a new SQLite file in ``workdir`` (or on the store at ``store``,
    beside what it holds); the downstream ledger is a new file in ``workdir``. Returns what
    happened: the store, the ledger, each scene's Task and how it ended."""
    workdir.mkdir(parents=True, exist_ok=True)
    db, ledger_file = workdir / "relaystate.db", workdir / "relaystate-ledger.db"
    for path in workdir.glob("relaystate-ledger.db*" if store else "relaystate*.db*"):
        path.unlink()
    url = store or f"sqlite:///{db}"

    def runtime() -> Runtime:
        return Runtime(open_store(url), templates(ledger_file), build="demo")

    _scene(out, "1. On her phone", "Alice: I need a flight from Beijing to Shanghai.")
    alice = Scope.user("alice")
    operator = Scope.admin("demo")
    with runtime() as rt:
        phone = rt.open_session(alice, "phone", language="en")
        state = rt.start(
            alice,
            "flight_booking",
            session_id=phone.id,
            slots={"origin": "Beijing", "destination": "Shanghai"},
            messages=[("user", "I need a flight from Beijing to Shanghai.")],
        )
        task_id = state.task.id
        print_state(out, state)
        out.print("[dim]Alice puts the phone away. The session may expire; the task will not.[/]")

    _scene(out, "2. On her laptop, a day later", "Alice: where were we?")
    with runtime() as rt:
        laptop = rt.open_session(alice, "laptop", language="en")
        found = rt.open_tasks(alice)
        out.print(f"Open tasks of alice, found by user id: {[t.id for t in found]}")
        resumed = rt.resume(alice, task_id)
        out.print(f"[bold]relaystate:[/] {resumed.task.status_text}")
        state = rt.fill(
            alice,
            task_id,
            {"date": "2027-01-22", "cabin_class": "商务舱", "passenger_name": "Alice Wang"},
            session_id=laptop.id,
            messages=[("user", "Jan 22, business class, Alice Wang")],
        )
        out.print(f"[bold]relaystate:[/] {state.task.status_text}")
        rt.confirm(alice, task_id, True, session_id=laptop.id, run=False)

    _scene(
        out,
        "3. A crash at the worst moment",
        "Alice confirms. The worker creates the order downstream, and is killed (SIGKILL) "
        "before it can record that the order exists.",
    )
    env = {**os.environ, "RELAYSTATE_FAILPOINTS": "after_effect:create_order=crash"}
    cmd = [sys.executable, "-m", "relaystate.cli", "tasks", "resume", task_id, "--json"]
    cmd += ["--store", url, "--ledger", str(ledger_file)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    out.print(f"worker exit code: {proc.returncode} (-9 is SIGKILL)")
    with runtime() as rt:
        order = next(a for a in rt.task(operator, task_id).actions if a.name == "create_order")
        out.print(f"create_order as recorded: [bold]{order.status}[/] (lease of a dead process)")
    out.print(f"downstream ledger: {_ledger_line(Ledger(ledger_file))}")

    _scene(
        out,
        "4. Recovery",
        "A new process starts and recovers. The lease's holder is dead, so it does not wait: "
        "it asks the downstream what happened to the order's idempotency key.",
    )
    with runtime() as rt:
        report = rt.recover(operator)
        out.print(f"recovered tasks: {report.outcomes}")
        final = rt.task(operator, task_id)
        print_state(out, final)
    out.print(f"downstream ledger: {_ledger_line(Ledger(ledger_file))}")
    if final.task.status != TaskStatus.DONE:
        raise RuntimeError(f"the demo task ended {final.task.status}, not done")

    _scene(out, "5. The journal", "Every change, why and by whom; any version can be replayed.")
    with runtime() as rt:
        baseline, entries = rt.history(alice, task_id)
        labels = rt.labels(task_type(baseline, entries))
        told = [t.said for t in narrate(baseline, entries, labels)]
        out.print(history_table(task_id, baseline, entries, told))
        confirmed = next(e.version for e in entries if e.reason == "user confirmed")
        then = rt.replay(alice, task_id, confirmed)
        out.print(
            f"Replayed at version {confirmed}: stage={then.task.stage}, "
            f"status={then.task.status}, actions={len(then.actions)}"
        )
    memory_task = _memory_scene(out, runtime)
    upgraded = _upgrade_scene(out, url, ledger_file)
    store_flags = f"--store {shlex.quote(url)} --ledger {shlex.quote(str(ledger_file))}"
    where = f"{db} (the store)" if store is None else f"the store {url}"
    out.print(f"\nFiles: {where} and {ledger_file} (the downstream). Try:")
    for command in (
        f"relaystate tasks history {task_id[:8]} {store_flags}",
        f"relaystate demo ledger {store_flags}",
    ):
        out.print(f"  {command}", soft_wrap=True, highlight=False, markup=False)
    return {
        "store": url,
        "ledger": str(ledger_file),
        "tasks": {
            "crash_and_recovery": {"id": task_id, "status": str(final.task.status)},
            "memory": memory_task,
            "rolling_upgrade": upgraded,
        },
        "downstream": Ledger(ledger_file).entries(),
    }


def _memory_scene(out: Console, runtime: Callable[[], Runtime]) -> dict[str, Any]:
    from ..conversation import Conversation
    from ..memory.assemble import task_context
    from ..memory.recorder import CONVERSATION, MemoryLayers, Recorder

    _scene(
        out,
        "6. Memory",
        "Alice plans a second trip in the chat and changes her mind twice. Every turn is "
        "remembered; the Task's context for the next turn is cut to 250 tokens.",
    )
    alice = Scope.user("alice")
    with runtime() as rt:
        layers = MemoryLayers.of(rt)
        chat = Conversation(rt, memory=Recorder(layers, clock=rt.clock))
        for said in (
            "book a flight from Shanghai to Tokyo",
            "Dec 9, economy, for Alice Wang",
            "actually make it business",
            "change the destination to Osaka",
        ):
            turn = chat.handle(alice, said, "tablet")
            out.print(f"[bold]Alice:[/] {said}\n[bold]relaystate:[/] {turn.reply}")
        assert turn.state is not None
        built = task_context(layers, turn.state, budget=250).context
        out.print(Panel(built.prompt.rstrip(), title=f"context: {built.tokens} of 250 tokens"))
        dropped = [d for d in built.explanation if not d.kept]
        out.print(
            f"left out: {len(dropped)} candidates, e.g. {dropped[0].reason}" if dropped else ""
        )
        assert layers.longterm is not None
        hits = layers.longterm.search(alice, CONVERSATION, "Tokyo", k=2, mode="keyword")
        out.print("search 'Tokyo': " + " | ".join(h.item.text for h in hits))
        return {"id": turn.state.task.id, "status": str(turn.state.task.status)}


def _upgrade_scene(out: Console, url: str, ledger_file: Path) -> dict[str, Any]:
    from ..errors import TaskTooNew
    from ..workers.worker import Worker
    from .after_sales import after_sales
    from .flights import flight_booking
    from .refund import refund

    _scene(
        out,
        "7. A new build while Bob is mid-task",
        "Build v2 adds a seat preference to flight bookings, with a migration for the "
        "bookings version 1 stored. Its server leaves Actions to workers (--execute queue).",
    )
    bob, operator = Scope.user("bob"), Scope.admin("demo")
    ledger = Ledger(ledger_file)

    def build(name: str, version: int, execute: str = "queue") -> Runtime:
        kinds = [flight_booking(ledger, version=version), refund(ledger), after_sales(ledger)]
        return Runtime(open_store(url), kinds, build=name, execute=execute)

    with build("v1", 1) as v1:
        slots = {"origin": "Paris", "destination": "Rome", "date": "2027-03-05"}
        slots |= {"cabin_class": "economy", "passenger_name": "Bob Li"}
        task_id = v1.start(bob, "flight_booking", slots=slots).task.id
        out.print(f"v1: Bob's booking waits for his yes: {v1.task(bob, task_id).task.status_text}")
    with build("v2", 2) as v2:
        state = v2.confirm(bob, task_id)  # read by v2: lifted first, then confirmed
        due = "-" if state.task.due_at is None else f"{state.task.due_at:%H:%M:%S} UTC"
        out.print(
            f"v2: Bob says yes. Template version {state.task.template_version}, slots "
            f"{state.task.slots}; its Actions wait in the queue for a worker (due {due})"
        )
        with build("v2", 2, execute="inline") as worker_rt:
            Worker(worker_rt).once()
        final = v2.task(operator, task_id)
        _, entries = v2.history(operator, task_id)
        lifted = next(i for i, e in enumerate(entries) if e.actor == "migration")
        for entry in entries[lifted:]:
            out.print(f"  journal v{entry.version} by {entry.actor}: {entry.reason}")
        out.print(f"v2 worker: {final.task.status_text}")
    with build("v1", 1) as v1:
        try:
            v1.cancel(bob, task_id)
        except TaskTooNew as exc:
            out.print(f"v1 leaves it alone: {exc}")
    out.print(f"downstream ledger: {_ledger_line(ledger)}")
    if final.task.status != TaskStatus.DONE:
        raise RuntimeError(f"the upgraded task ended {final.task.status}, not done")
    return {"id": task_id, "status": str(final.task.status), "version": 2}


def _ledger_line(ledger: Ledger) -> str:
    rows = ledger.entries()
    if not rows:
        return "no requests yet"
    return "; ".join(
        f"{r['kind']} {r['effect']['id'] if r['effect'] else '-'}: "
        f"{r['requests']} request(s), {r['effects']} effect(s)"
        for r in rows
    )
