"""The rolling upgrade, step by step, as an operator does it while users talk:

1. nginx in front of two API processes of build v1 (``--execute queue``), two v1 workers;
   the load starts (users mid-conversation and mid-action all along);
2. two v2 API processes and two v2 workers start; nginx is reloaded with all four APIs;
3. the v1 API processes get SIGTERM one by one; nginx is reloaded with the v2 ones only;
4. once ``relaystate builds`` says no open Task is pinned to v1 (the operator's rule), the
   v1 workers get SIGTERM one by one;
5. the load goes on, then ends: users finish the Tasks they have open;
6. ``relaystate migrate`` (v2) lifts what is still on version 1.

Shared by tests/upgrade/test_rolling_upgrade.py (which asserts on the outcome) and
bench/rolling_upgrade.py (which prints it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fleet import Fleet, Proc, Proxied, access_log
from .load import Load

Say = Callable[[str], None]


@dataclass
class Upgrade:
    fleet: Fleet
    load: Load
    marks: dict[str, float] = field(default_factory=dict)
    """Step -> time.time() when it happened."""
    stopped: dict[str, float | None] = field(default_factory=dict)
    """Process -> seconds from its SIGTERM to its exit (None: it did not exit in time)."""
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    builds_after_v1_apis: dict[str, Any] = field(default_factory=dict)
    """``relaystate builds`` once the v1 API processes exited (they must be gone from it)."""
    builds_when_v1_workers_stopped: dict[str, Any] = field(default_factory=dict)
    proxied: list[Proxied] = field(default_factory=list)
    """Every request as nginx logged it (which processes it asked, what they answered)."""
    migrate: dict[str, Any] = field(default_factory=dict)
    left_open: list[str] = field(default_factory=list)

    def mark(self, step: str) -> None:
        self.marks[step] = time.time()

    def stop(self, proc: Proc) -> None:
        self.mark(f"sigterm {proc.name}")
        self.stopped[proc.name] = self.fleet.stop(proc)
        self.exit_codes[proc.name] = proc.returncode


@contextmanager
def rolling_upgrade(
    store: str,
    base: Path,
    *,
    users: int = 20,
    warm: float = 8.0,
    overlap: float = 6.0,
    between: float = 3.0,
    after: float = 6.0,
    retire_timeout: float = 120.0,
    action_seconds: str = "0.3:1.5",
    say: Say = lambda _: None,
) -> Iterator[Upgrade]:
    """Run the whole upgrade; yields its outcome while the v2 processes still run (the
    caller may read through them), then stops everything. ``action_seconds``: how long
    each side effect takes, ``LOW:HIGH`` (tests/upgrade/common.py)."""
    fleet = Fleet(store, base, action_seconds=action_seconds)
    load: Load | None = None
    try:
        keys = fleet.prepare([f"user-{i:02d}" for i in range(users)])
        v1 = [fleet.api("v1", "api-v1-a"), fleet.api("v1", "api-v1-b")]
        v1_workers = [fleet.worker("v1", "worker-v1-a"), fleet.worker("v1", "worker-v1-b")]
        fleet.ready(*v1, *v1_workers)
        fleet.balance(v1)
        load = Load(fleet.url, keys)
        up = Upgrade(fleet, load)
        say(f"v1 up behind nginx on {fleet.url}; {users} users start")
        load.start()
        up.mark("load started")
        time.sleep(warm)

        v2 = [fleet.api("v2", "api-v2-a"), fleet.api("v2", "api-v2-b")]
        v2_workers = [fleet.worker("v2", "worker-v2-a"), fleet.worker("v2", "worker-v2-b")]
        up.mark("v2 starting")
        fleet.ready(*v2, *v2_workers)
        fleet.balance(v1 + v2)
        up.mark("v2 in nginx")
        say("v2 up; nginx balances v1 and v2")
        time.sleep(overlap)

        for proc in v1:
            up.stop(proc)
            say(f"{proc.name} stopped in {up.stopped[proc.name]} s, exit {proc.returncode}")
            time.sleep(between)
        fleet.balance(v2)
        up.mark("v1 APIs gone")
        up.builds_after_v1_apis = fleet.builds()

        deadline = time.monotonic() + retire_timeout
        while True:
            found = fleet.builds()
            pinned = found.get("v1", {}).get("pinned_open_tasks", 0)
            if pinned == 0:
                up.builds_when_v1_workers_stopped = found
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"v1 still has {pinned} pinned open tasks: {found}")
            time.sleep(1.0)
        up.mark("v1 can retire")
        say("relaystate builds: nothing pinned to v1 any more; stopping its workers")
        for proc in v1_workers:
            up.stop(proc)
            say(f"{proc.name} stopped in {up.stopped[proc.name]} s, exit {proc.returncode}")
        up.mark("v1 gone")
        time.sleep(after)

        up.mark("load ending")
        load.stop()
        up.mark("load ended")
        say(f"load ended: {load.summary()['requests']} requests")
        assert fleet.nginx is not None
        up.proxied = access_log(fleet.nginx.access_log)
        up.left_open = _wait_finished(fleet, timeout=60.0)
        up.migrate = fleet.cli("migrate", app=True, build="v2")
        yield up
        for proc in v2 + v2_workers:
            up.stop(proc)
    finally:
        if load is not None:
            load.stopping.set()
        fleet.close()


def _wait_finished(fleet: Fleet, timeout: float) -> list[str]:
    """Wait until no Task is open; the ones still open after ``timeout``."""
    from relaystate import open_store
    from relaystate.model import OPEN_TASK_STATUSES

    from .evidence import ADMIN

    stores = open_store(fleet.store)
    try:
        deadline = time.monotonic() + timeout
        while True:
            found = stores.tasks.list_tasks(ADMIN, statuses=OPEN_TASK_STATUSES, limit=10**6)
            if not found or time.monotonic() > deadline:
                return [t.id for t in found]
            time.sleep(0.5)
    finally:
        stores.close()
