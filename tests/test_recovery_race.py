"""Two processes recover the same 1,000 interrupted tasks at once: each reconciled once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from relaystate import ActionStatus, Runtime, Scope, TaskStatus, open_store
from relaystate.demo.ledger import Ledger

from . import recovery_app

ADMIN = Scope.admin("test")

TASKS = 1000
ROOT = Path(__file__).resolve().parent.parent


def test_two_recoverers_reconcile_each_action_exactly_once(
    sql_store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger_path = tmp_path / "ledger.db"
    monkeypatch.setenv("RELAYSTATE_LEDGER", str(ledger_path))
    monkeypatch.setenv("RECOVERY_CRASH", "1")
    crashed = Runtime(open_store(sql_store_url), recovery_app.templates())
    ids = []
    for _ in range(TASKS):
        task_id = crashed.start(Scope.user("u"), "payment", run=False).task.id
        with pytest.raises(recovery_app.Crash):
            crashed.advance(ADMIN, task_id)
        ids.append(task_id)
    crashed.close()  # deregisters: its leases count as expired at once
    monkeypatch.delenv("RECOVERY_CRASH")

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "relaystate.cli", "recover", "--json", "--store", sql_store_url]
    cmd += ["--app", "tests.recovery_app:templates"]
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert all(r["errors"] == {} for r in reports)

    with Runtime(open_store(sql_store_url), recovery_app.templates()) as rt:
        reconciled: Counter[str] = Counter()
        workers: Counter[str] = Counter()
        for task_id in ids:
            state = rt.task(ADMIN, task_id)
            assert state.task.status == TaskStatus.DONE
            assert [a.status for a in state.actions] == [ActionStatus.SUCCESS]
            _, entries = rt.history(ADMIN, task_id)
            takes = [e for e in entries if e.reason.startswith("reconciling pay")]
            reconciled[task_id] = len(takes)
            workers.update(e.actor for e in takes)
    assert set(reconciled.values()) == {1}  # exactly once each, whichever process did it
    print("reconciled per worker:", dict(workers))
    assert sum(workers.values()) == TASKS and len(workers) <= 2
    ledger = Ledger(ledger_path).entries()
    assert len(ledger) == TASKS and {(e["requests"], e["effects"]) for e in ledger} == {(1, 1)}
