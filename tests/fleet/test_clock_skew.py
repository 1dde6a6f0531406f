"""A process whose clock runs ahead or behind judges no lease by it (issue 22).

Process A runs a slow payment, its Action ``running`` under a 5 s lease that A's heartbeat
keeps extending. Process B, its clock 60 s ahead or 10 minutes behind (libfaketime), runs a
recovery pass meanwhile over the same PostgreSQL. By its own clock A's lease would be long
over (ahead) or, for a dead holder, never end (behind); by the database server's clock,
which every runtime reads, it is alive: B leaves it, and A settles it alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.runtime.shared_clock import SharedClock
from relaystate.workers.presence import Presence

from . import rig
from .agent import Payments, templates

ALICE = Scope.user("alice")


@pytest.fixture
def payments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if not Path(rig.FAKETIME).exists():
        pytest.skip("no libfaketime (apt-get install faketime)")
    path = tmp_path / "payments.db"
    monkeypatch.setenv("PAYMENTS", str(path))
    monkeypatch.setenv("PAY_SECONDS", "6")
    return path


@pytest.mark.parametrize("skew", [60, -600])
def test_a_skewed_process_leaves_a_live_lease_alone(
    postgres_url: str, payments: Path, skew: int
) -> None:
    rt = Runtime(open_store(postgres_url), templates(), lease=timedelta(seconds=5))
    assert isinstance(rt.clock, SharedClock)
    presence = Presence(rt, lease=timedelta(seconds=5))
    presence.start()  # A's heartbeat extends its lease while the payment runs
    conv = Conversation(rt)
    asked = conv.handle(ALICE, "pay 30 euros to bob", "s1")
    assert asked.state is not None and asked.state.task.stage == "confirming"
    done: list[object] = []
    paying = threading.Thread(target=lambda: done.append(conv.handle(ALICE, "yes", "s1")))
    paying.start()
    try:
        time.sleep(1.5)  # A holds the running Action
        task_id = asked.state.task.id
        held = rt.task(ALICE, task_id).actions[0]
        assert str(held.status) == "running" and held.lease_owner == rt.owner
        b = subprocess.run(
            [
                *rig.relaystate("recover", "--store", postgres_url, "--json", "--app"),
                "tests.fleet.agent:templates",
            ],
            env={**os.environ, **rig.skewed(skew), "PYTHONPATH": str(rig.REPO)},
            cwd=rig.REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert b.returncode == 0, b.stderr
        report = json.loads(b.stdout)
        still = rt.task(ALICE, task_id).actions[0]
        assert still.lease_owner == rt.owner and str(still.status) == "running", report
    finally:
        paying.join(30)
        presence.stop()
    assert done, "A's turn did not return"
    final = rt.task(ALICE, asked.state.task.id)
    rt.close()
    assert str(final.task.status) == "done"
    assert Payments(payments, 0).by_key() == {final.actions[0].idempotency_key: 1}
    # B's clock really was off: faketime moves what Python reads
    probe = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env={**os.environ, **rig.skewed(skew)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert abs(float(probe.stdout) - time.time() - skew) < 5
