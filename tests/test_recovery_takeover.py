"""A `relaystate recover` killed with SIGKILL while it holds recovery claims: the next
`recover` takes the claims over at once instead of waiting out their lease (issue 9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, TaskStatus, open_store

from . import recovery_app

ADMIN = Scope.admin("test")
TASKS = 20
ROOT = Path(__file__).resolve().parent.parent


def test_claims_of_a_killed_recoverer_are_taken_over_at_once(
    sql_store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYSTATE_LEDGER", str(tmp_path / "ledger.db"))
    with Runtime(open_store(sql_store_url), recovery_app.templates()) as rt:
        ids = [rt.start(Scope.user("u"), "payment", run=False).task.id for _ in range(TASKS)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "relaystate.cli", "recover", "--json", "--store", sql_store_url]
    cmd += ["--app", "tests.recovery_app:templates"]
    stuck = subprocess.Popen(  # claims its batch, then hangs in the first effect
        cmd,
        cwd=ROOT,
        env={**env, "RELAYSTATE_FAILPOINTS": "before_effect:pay=sleep=600"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with Runtime(open_store(sql_store_url), recovery_app.templates()) as rt:
            deadline = time.monotonic() + 60
            while not rt.stores.coordination.recovery_claimants(datetime.now(UTC)):
                assert time.monotonic() < deadline, "the first recoverer never claimed"
                assert stuck.poll() is None, stuck.communicate()
                time.sleep(0.05)
    finally:
        stuck.send_signal(signal.SIGKILL)
        stuck.wait()

    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["claimed_by_another_recoverer"] == 0 and report["errors"] == {}
    assert took < 30, f"recover waited {took:.1f}s: the dead recoverer's claims were waited out"
    print(f"recover after a killed recoverer: {took:.2f} s")
    with Runtime(open_store(sql_store_url), recovery_app.templates()) as rt:
        assert {rt.task(ADMIN, t).task.status for t in ids} == {TaskStatus.DONE}
