"""Failpoint parsing and effects; lease expiry by time, by death and by deregistration."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from relaystate import failpoints
from relaystate.actions.leases import Owner, hostname, lease_expired

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def test_failpoint_specs_parse_and_bad_ones_are_named() -> None:
    table = failpoints.parse("after_effect:pay=crash; after_record=sleep=0.25,")
    assert table[("after_effect", "pay")].effect == "crash"
    assert table[("after_record", None)].seconds == 0.25
    for bad in ("nowhere=crash", "after_effect", "after_effect=explode", "after_effect=sleep=x"):
        with pytest.raises(ValueError, match="failpoint"):
            failpoints.parse(bad)


def test_sleep_stalls_only_the_named_action() -> None:
    failpoints.configure("before_effect:slow=sleep=0.2")
    try:
        began = time.perf_counter()
        failpoints.hit("before_effect", "fast")
        fast = time.perf_counter() - began
        failpoints.hit("before_effect", "slow")
        slow = time.perf_counter() - began - fast
    finally:
        failpoints.configure(None)
    assert fast < 0.1 <= 0.15 <= slow


def test_crash_kills_the_process_like_sigkill() -> None:
    code = "from relaystate import failpoints; failpoints.hit('after_commit', 'x'); print('alive')"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"RELAYSTATE_FAILPOINTS": "after_commit=crash", "PATH": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -9 and "alive" not in proc.stdout


def test_leases_expire_by_time_deregistration_and_death() -> None:
    me = Owner.current().id
    later = NOW + timedelta(minutes=1)
    assert lease_expired(None, None, NOW, me=me)
    assert not lease_expired(me, NOW - timedelta(hours=1), NOW, me=me)  # never to myself
    sibling = Owner.current().id  # another runtime in this same, living process
    assert not lease_expired(sibling, later, NOW, me=me)
    assert lease_expired(sibling, NOW, NOW, me=me)
    assert lease_expired(sibling, later, NOW, me=me, is_stopped=lambda o: o == sibling)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ticks = Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[19]
        theirs = Owner(hostname(), child.pid, ticks, "abc").id
        assert not lease_expired(theirs, later, NOW, me=me)
        reused = Owner(hostname(), child.pid, "1", "abc").id  # same pid, another process
        assert lease_expired(reused, later, NOW, me=me)
    finally:
        child.kill()
        child.wait()
    assert lease_expired(theirs, later, NOW, me=me)
    elsewhere = Owner("another-host", child.pid, "1", "abc").id
    assert not lease_expired(elsewhere, later, NOW, me=me)  # other hosts: by time only
    assert Owner.parse("garbage") is None
