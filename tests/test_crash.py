"""Crash tests with real processes: SIGKILL at every failpoint, then recovery in a new process.

Each case runs ``crash_agent.py run`` with ``RELAYSTATE_FAILPOINTS`` set so that the process
kills itself (SIGKILL: no cleanup, no flush) at one point of the action protocol, inspects the
store and the downstream ledger as the crash left them, then runs ``crash_agent.py recover``
as a *new* process and checks what recovery made of it:

* every idempotency key has exactly one effect in the ledger, never two;
* the task ends ``done``, or ``needs_attention`` where the outcome of a non-idempotent action
  without a ``check`` is unknown (claimed, then killed before its result was committed);
* nothing committed before the crash is lost: slots, confirmation, earlier actions and the
  journal up to the crash are unchanged, the journal has versions 1..N without gaps and
  replays to the current state;
* the dead process's lease (300 s) does not delay recovery: a dead holder on this host counts
  as expired at once.

An action is recorded already claimed (``running``, attempts 1, under the lease), in the same
commit as the change that made it due: the user's confirmation, or the previous action's
result. So a crash at ``before_record`` of an action loses that commit, and with it the
*previous* action's result; there is no moment between one action's result and the next
record any more. What each failpoint leaves in doubt, for the target action (``charge``, or
``ship`` in the two-effect sequence) and the action before it (``quote``, or ``charge``):

================  =====================================================================
point             in doubt after the crash
================  =====================================================================
before_record     the previous action: claimed, run, result lost (a read-only quote runs
                  again; a charge whose effect landed is settled by the rules below)
after_record      the target: claimed, no effect yet
before_effect     the target: claimed, no effect yet
after_effect      the target: claimed, its effect landed
after_commit      the action after the target (a read-only receipt), claimed in the same
                  commit as the target's result; nothing after the last action
================  =====================================================================

And how recovery settles an action in doubt, by declaration: a check finds the effect and
adopts it (1 request) or says not found and it runs again (attempt 2); an idempotent action
without a check repeats with the same key (the downstream deduplicates: 1 effect); a
non-idempotent action without a check cannot be known, so the task needs attention (with
0 or 1 effect, as the crash left it), never a blind repeat.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from relaystate import ActionStatus, Runtime, Scope, TaskState, TaskStatus, open_store
from relaystate.demo.ledger import Ledger
from relaystate.failpoints import ENV, POINTS

ADMIN = Scope.admin("test")

AGENT = Path(__file__).with_name("crash_agent.py")
TASK = "task-1"
SLOTS = {"amount": 120, "payee": "ACME Ltd"}
LEASE = 300.0
"""The lease the agents take: far longer than the whole test file may run."""
FAST = 5.0
"""Recovery must finish well inside this many seconds (it must not wait for a lease)."""

DECLS = ("idem_check", "idem_nocheck", "nonidem_check", "nonidem_nocheck")
IDEMPOTENT = {"idem_check": True, "idem_nocheck": True, "nonidem_check": False}
CHECKABLE = {"idem_check": True, "idem_nocheck": False, "nonidem_check": True}


def idempotent(decl: str) -> bool:
    return IDEMPOTENT.get(decl, False)


def checkable(decl: str) -> bool:
    return CHECKABLE.get(decl, False)


# -- running the agent ------------------------------------------------------------------------
@dataclass
class Setup:
    store: str
    ledger: Path
    decl: str
    shape: str

    def args(self, command: str) -> list[str]:
        return [
            sys.executable,
            str(AGENT),
            command,
            "--store",
            self.store,
            "--ledger",
            str(self.ledger),
            "--decl",
            self.decl,
            "--shape",
            self.shape,
            "--task-id",
            TASK,
            "--lease",
            str(LEASE),
        ]


def _env(failpoints: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoints is not None:
        env[ENV] = failpoints
    return env


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def crash_run(setup: Setup, failpoints: str) -> str:
    """Run the agent until the failpoint kills it; returns the dead process's lease owner id."""
    proc = subprocess.run(
        setup.args("run"), env=_env(failpoints), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    lines = _lines(proc.stdout)
    assert [line["event"] for line in lines] == ["started"], proc.stdout  # never finished
    return str(lines[0]["owner"])


def recover_run(setup: Setup) -> dict[str, Any]:
    """Run ``recover`` in a new process without failpoints; returns what it printed."""
    began = time.monotonic()
    proc = subprocess.run(
        setup.args("recover"), env=_env(None), capture_output=True, text=True, timeout=60
    )
    wall = time.monotonic() - began
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    (report,) = _lines(proc.stdout)
    assert report["errors"] == {}
    assert report["elapsed"] < FAST and wall < 4 * FAST, (report["elapsed"], wall)
    return report


@pytest.fixture
def make_setup(sql_store_url: str, tmp_path: Path) -> Any:
    """The same crash scenarios on the embedded store and on PostgreSQL."""

    def make(decl: str, shape: str = "single") -> Setup:
        return Setup(sql_store_url, tmp_path / "ledger.db", decl, shape)

    return make


# -- reading what the processes left behind ---------------------------------------------------
@dataclass
class Seen:
    state: TaskState
    journal: list[dict[str, Any]]
    ledger: dict[str, dict[str, Any]]


def look(setup: Setup) -> Seen:
    """The task, its journal and the ledger as stored right now (read-only)."""
    rt = Runtime(open_store(setup.store), [])
    try:
        state = rt.task(ADMIN, TASK)
        baseline, entries = rt.history(ADMIN, TASK)
        assert baseline is None
        versions = [e.version for e in entries]
        assert versions == list(range(1, state.task.version + 1)), versions  # no gaps
        assert rt.replay(ADMIN, TASK).to_dict() == state.to_dict()
        journal = [e.to_dict() for e in entries]
    finally:
        rt.close()
    ledger = {e["idempotency_key"]: e for e in Ledger(setup.ledger).entries()}
    return Seen(state, journal, ledger)


def peek(setup: Setup) -> TaskState | None:
    """The task as stored right now, or None before it exists."""
    store = open_store(setup.store).tasks
    try:
        return store.load(TASK, ADMIN)
    finally:
        store.close()


def named(state: TaskState, name: str) -> Any:
    rows = [a for a in state.actions if a.name == name]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


# -- what each failpoint must lead to ---------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    status: TaskStatus
    action_status: ActionStatus
    effects: int  # effects in the ledger for the action's key (0 or 1, never more)
    requests: int  # requests the ledger received for that key
    attempts: int


def in_doubt(shape: str, point: str) -> tuple[str, bool] | None:
    """The action a crash at ``point`` of the target leaves claimed but unsettled, and
    whether its effect had happened (None: nothing is in doubt)."""
    target, previous = ("charge", "quote") if shape == "single" else ("ship", "charge")
    if point == "before_record":
        return previous, True
    if point in ("after_record", "before_effect"):
        return target, False
    if point == "after_effect":
        return target, True
    # after_commit: the commit of the target's result also claimed the next action, if any
    return ("receipt", False) if shape == "single" else None


def settled(decl: str, name: str, happened: bool) -> Expect:
    """How recovery settles an action in doubt, and where that leaves the task."""
    done, attention = TaskStatus.DONE, TaskStatus.NEEDS_ATTENTION
    success, unknown = ActionStatus.SUCCESS, ActionStatus.UNKNOWN
    if name in ("quote", "receipt"):  # read-only: safe to repeat
        return Expect(done, success, 0, 0, 2)
    if not happened:
        if checkable(decl) or idempotent(decl):  # not found / safe to repeat: run again
            return Expect(done, success, 1, 1, 2)
        return Expect(attention, unknown, 0, 0, 1)  # it did not happen, but nobody can tell
    if checkable(decl):  # the check finds the effect: adopted, not repeated
        return Expect(done, success, 1, 1, 1)
    if idempotent(decl):  # repeated with the same key; the downstream deduplicates
        return Expect(done, success, 1, 2, 2)
    return Expect(attention, unknown, 1, 1, 1)


def test_expectations_cover_every_failpoint() -> None:
    assert set(POINTS) == {
        "before_record",
        "after_record",
        "before_effect",
        "after_effect",
        "after_commit",
    }
    # The cases the issue singles out for a non-idempotent action without a check.
    assert settled("nonidem_nocheck", "charge", False) == Expect(
        TaskStatus.NEEDS_ATTENTION, ActionStatus.UNKNOWN, 0, 0, 1
    )
    assert settled("nonidem_nocheck", "charge", True) == Expect(
        TaskStatus.NEEDS_ATTENTION, ActionStatus.UNKNOWN, 1, 1, 1
    )
    assert in_doubt("single", "after_commit") == ("receipt", False)
    assert in_doubt("sequence", "after_commit") is None
    assert in_doubt("single", "before_record") == ("quote", True)
    assert in_doubt("sequence", "before_record") == ("charge", True)


# -- the crash matrix -------------------------------------------------------------------------
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("decl", DECLS)
@pytest.mark.parametrize("shape", ["single", "sequence"])
def test_crash_at_failpoint_then_recover(
    make_setup: Any, shape: str, decl: str, point: str
) -> None:
    setup = make_setup(decl, shape)
    target = "charge" if shape == "single" else "ship"
    doubt = in_doubt(shape, point)
    want = settled(decl, *doubt) if doubt is not None else None

    dead = crash_run(setup, f"{point}:{target}=crash")

    # -- what the crash left -------------------------------------------------------------
    crashed = look(setup)
    task = crashed.state.task
    assert task.slots == SLOTS and task.confirmed
    before_target = "quote" if shape == "single" else "charge"
    for action in crashed.state.actions:
        if doubt is not None and action.name == doubt[0]:
            # Claimed by the process that is now dead, its result never committed.
            assert (action.status, action.attempts) == (ActionStatus.RUNNING, 1)
            assert action.lease_owner == dead
        else:
            assert (action.status, action.attempts) == (ActionStatus.SUCCESS, 1)
            assert action.lease_owner is None
    names = [a.name for a in crashed.state.actions]
    if point == "before_record":
        assert names[-1] == before_target and target not in names
    else:
        assert target in names
    if shape == "sequence" and "charge" in names and point != "before_record":
        charge = named(crashed.state, "charge")
        assert charge.output == crashed.ledger[charge.idempotency_key]["effect"]
    if point == "after_commit" and shape == "sequence":
        assert task.status == TaskStatus.DONE  # ship was the last action
    else:
        assert task.status == TaskStatus.RUNNING
    keys = {a.name: a.idempotency_key for a in crashed.state.actions}
    landed = {name for name in ("charge", "ship") if keys.get(name) in crashed.ledger}
    happened = {"charge"} if shape == "sequence" and point == "before_record" else set()
    if point in ("after_effect", "after_commit"):
        happened |= {target} | ({"charge"} if shape == "sequence" else set())
    elif shape == "sequence":
        happened |= {"charge"}
    assert landed == happened
    assert all(e["effects"] == 1 for e in crashed.ledger.values())

    # -- recovery in a new process ---------------------------------------------------------
    report = recover_run(setup)
    assert report["owner"] != dead
    assert report["skipped"] == 0  # nothing was left to a live holder
    if doubt is not None:
        # The dead holder's lease still had minutes to run, yet recovery took it at once.
        (open_action,) = report["open_actions"]
        assert open_action["name"] == doubt[0] and open_action["lease_owner"] == dead
        assert open_action["lease_left"] > LEASE - 60
    else:
        assert report["open_actions"] == []
    if want is None:
        assert task.status == TaskStatus.DONE  # the last action committed: nothing to resume
        assert report["resumed"] == [] and report["examined"] == 0
    else:
        status = TaskStatus.DONE if want is None else want.status
        assert report["resumed"] == [TASK]
        assert report["outcomes"] == {TASK: str(status)}

    after = look(setup)
    state = after.state
    final_status = TaskStatus.DONE if want is None else want.status
    assert state.task.status == final_status, state.task.status_text
    # Nothing committed before the crash is lost or rewritten.
    assert state.task.slots == SLOTS and state.task.confirmed
    assert after.journal[: len(crashed.journal)] == crashed.journal
    for before in crashed.state.actions:
        if before.status == ActionStatus.SUCCESS:
            assert state.action(before.seq).to_dict() == before.to_dict()
        assert state.action(before.seq).idempotency_key == before.idempotency_key  # never changes

    if doubt is not None and want is not None:
        row = named(state, doubt[0])
        assert (row.status, row.attempts) == (want.action_status, want.attempts)
        if want.effects:
            assert after.ledger[row.idempotency_key]["requests"] == want.requests
        else:
            assert row.idempotency_key not in after.ledger
    if final_status == TaskStatus.DONE and doubt is not None and doubt[0] != target:
        row = named(state, target)  # recorded and run once, after the previous one settled
        assert (row.status, row.attempts) == (ActionStatus.SUCCESS, 1)

    # The downstream: one effect per key at most, and exactly the keys expected.
    assert all(e["effects"] == 1 for e in after.ledger.values()), after.ledger
    side_effects = [a for a in state.actions if a.name in ("charge", "ship")]
    unsettled = {a.name for a in side_effects if a.status == ActionStatus.UNKNOWN}
    with_effect = {
        a.idempotency_key
        for a in side_effects
        if a.name not in unsettled or (want is not None and want.effects)
    }
    assert set(after.ledger) == with_effect

    if final_status == TaskStatus.DONE:
        # What the task recorded is the one effect the downstream really made.
        for action in side_effects:
            assert action.output == after.ledger[action.idempotency_key]["effect"]
            assert after.ledger[action.idempotency_key]["effects"] == 1
        assert state.task.progress.done == state.task.progress.total == 3
        if shape == "single":
            receipt = named(state, "receipt")
            assert receipt.status == ActionStatus.SUCCESS
            assert receipt.output["charge_id"] == named(state, "charge").output["id"]
        assert not [a for a in state.actions if a.status.is_open]
    else:
        assert state.task.status == TaskStatus.NEEDS_ATTENTION
        assert doubt is not None
        assert named(state, doubt[0]).output is None
        assert [a.name for a in state.actions][-1] == doubt[0]  # nothing ran after it

    # Recovering again, in yet another process, changes nothing and calls nobody.
    again = recover_run(setup)
    assert again["skipped"] == 0
    final = look(setup)
    assert final.state.to_dict() == state.to_dict()
    assert final.ledger == after.ledger


def test_run_without_failpoints_is_the_baseline(make_setup: Any) -> None:
    setup = make_setup("nonidem_nocheck", "sequence")
    proc = subprocess.run(
        setup.args("run"), env=_env(None), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert [line["event"] for line in _lines(proc.stdout)] == ["started", "finished"]
    seen = look(setup)
    assert seen.state.task.status == TaskStatus.DONE
    assert [(a.name, a.attempts) for a in seen.state.actions] == [
        ("quote", 1),
        ("charge", 1),
        ("ship", 1),
    ]
    assert sorted(e["kind"] for e in seen.ledger.values()) == ["charge", "shipment"]
    assert all((e["requests"], e["effects"]) == (1, 1) for e in seen.ledger.values())


@pytest.mark.skipif(
    not hasattr(os, "waitid") or not Path("/proc/self/stat").exists(), reason="Linux only"
)
def test_a_killed_holder_not_yet_reaped_counts_as_dead(make_setup: Any) -> None:
    """A zombie (killed, its parent has not called wait yet) holds no live lease."""
    setup = make_setup("idem_check")
    proc = subprocess.Popen(
        setup.args("run"),
        env=_env("before_effect:charge=crash"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, left unreaped
        state = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0]
        assert state == "Z"
        report = recover_run(setup)
        (open_action,) = report["open_actions"]
        assert open_action["lease_left"] > LEASE - 60
        assert report["outcomes"] == {TASK: "done"}
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    seen = look(setup)
    charge = named(seen.state, "charge")
    assert (charge.status, charge.attempts) == (ActionStatus.SUCCESS, 2)
    (entry,) = seen.ledger.values()
    assert (entry["requests"], entry["effects"]) == (1, 1)


# -- a stall is not a crash -------------------------------------------------------------------
STALL = 2.5
"""Seconds the stalled agent sleeps in its failpoint; recovery runs in well under that."""


@pytest.mark.parametrize(
    ("point", "decl", "held_status"),
    [
        ("after_record", "nonidem_nocheck", ActionStatus.RUNNING),
        ("before_effect", "idem_check", ActionStatus.RUNNING),
        ("before_effect", "nonidem_nocheck", ActionStatus.RUNNING),
        ("after_effect", "idem_nocheck", ActionStatus.RUNNING),
    ],
)
def test_recover_leaves_a_live_stalled_holder_alone(
    make_setup: Any, point: str, decl: str, held_status: ActionStatus
) -> None:
    """A process stalled inside the protocol still holds its lease: nobody may take it over."""
    setup = make_setup(decl)
    stalled = subprocess.Popen(
        setup.args("run"),
        env=_env(f"{point}:charge=sleep={STALL}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert stalled.stdout is not None
        holder = json.loads(stalled.stdout.readline())["owner"]
        deadline = time.monotonic() + 10
        while True:  # wait until it sits in the failpoint
            current = peek(setup)
            charge = None if current is None else named(current, "charge")
            reached = charge is not None and charge.status == held_status
            if reached and (point != "after_effect" or Ledger(setup.ledger).entries()):
                break
            assert time.monotonic() < deadline, f"the agent never reached {point}"
            assert stalled.poll() is None, stalled.stderr.read() if stalled.stderr else ""
            time.sleep(0.05)
        held = look(setup)
        assert named(held.state, "charge").lease_owner == holder

        report = recover_run(setup)
        assert stalled.poll() is None, "the stall ended before recovery ran; this proves nothing"
        (open_action,) = report["open_actions"]
        assert open_action["lease_owner"] == holder
        assert open_action["status"] == str(held_status)
        assert report["skipped"] == 1
        # Recovery may pass over the task or look at it and stop; either way it stays running.
        assert report["outcomes"].get(TASK, "running") == "running"
        untouched = look(setup)
        assert untouched.state.to_dict() == held.state.to_dict()  # recovery wrote nothing
        assert untouched.ledger == held.ledger  # and did not call the downstream
        assert len(held.ledger) == (point == "after_effect")

        # Nor may another worker resuming the task directly.
        proc = subprocess.run(
            setup.args("resume"), env=_env(None), capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        (resumed,) = _lines(proc.stdout)
        assert resumed["elapsed"] < FAST
        assert resumed["status"] == "running"
        assert resumed["step"] == "InProgress"
        assert stalled.poll() is None, "the stall ended before resume ran; this proves nothing"
        untouched = look(setup)
        assert untouched.state.to_dict() == held.state.to_dict()
        assert untouched.ledger == held.ledger

        out, err = stalled.communicate(timeout=30)
    finally:
        if stalled.poll() is None:
            stalled.kill()
            stalled.wait()
    assert stalled.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["status"] == "done"
    seen = look(setup)
    assert seen.state.task.status == TaskStatus.DONE
    charge = named(seen.state, "charge")
    assert (charge.status, charge.attempts, charge.lease_owner) == (ActionStatus.SUCCESS, 1, None)
    (entry,) = seen.ledger.values()
    assert (entry["requests"], entry["effects"]) == (1, 1)
    assert charge.output == entry["effect"]
