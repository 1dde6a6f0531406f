"""Many real processes writing the same task and sibling tasks: no lost update, ever."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from relaystate import Runtime, Scope, open_store

from .hammer import CHAT

ADMIN = Scope.admin("test")

PROCESSES = 32
ROUNDS = 20
ROOT = Path(__file__).resolve().parent.parent


def test_32_processes_lose_no_update(sql_store_url: str) -> None:
    with Runtime(open_store(sql_store_url), [CHAT]) as rt:
        shared = rt.start(Scope.user("u"), "chat").task.id
        own = [rt.start(Scope.user("u"), "chat").task.id for _ in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.hammer", sql_store_url, "u", shared, own[i], str(ROUNDS)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    with Runtime(open_store(sql_store_url), [CHAT]) as rt:
        final = rt.task(ADMIN, shared).task
        counts = final.context["count"]
        # Every increment that returned success is in the row: none was lost.
        assert {r["pid"]: r["shared"] for r in reports if r["shared"]} == counts
        landed = sum(r["shared"] + r["turns"] for r in reports)
        assert final.version == 1 + landed  # each landed change is exactly one version
        _, entries = rt.history(ADMIN, shared)
        assert [e.version for e in entries] == list(range(1, final.version + 1))
        assert rt.replay(ADMIN, shared).to_dict() == rt.task(ADMIN, shared).to_dict()
        for report, task_id in zip(reports, own, strict=True):
            mine = rt.task(ADMIN, task_id).task
            assert mine.context["count"] == {report["pid"]: report["own"]}
        conflicts = sum(r["conflicts"] for r in reports)
        attempted = PROCESSES * ROUNDS * 3
        assert landed + sum(r["own"] for r in reports) + conflicts == attempted
        messages = sum(
            len(rt.messages(Scope.user("u"), f"s-{r['pid']}", limit=1000)) for r in reports
        )
        assert messages == sum(r["turns"] for r in reports)  # a turn's messages land with it
