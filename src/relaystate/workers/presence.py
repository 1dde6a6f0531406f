"""A process's presence in the store: registered with its build and role, a heartbeat, the
leases of the work it holds kept alive, and a deregistration when it stops (after which
its leases count as expired at once everywhere). What ``relaystate workers`` and
``relaystate builds`` read."""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import timedelta

from ..model import WorkerInfo
from ..runtime.runtime import Runtime

log = logging.getLogger("relaystate.presence")
MAX_INTERVAL = 30.0


class Presence:
    """Heartbeats for one runtime's process on a background thread."""

    def __init__(
        self, runtime: Runtime, *, role: str = "worker", lease: timedelta = timedelta(seconds=30)
    ) -> None:
        self.runtime = runtime
        self.role = role
        self.lease = lease
        self.info: WorkerInfo = runtime.worker_info()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        """A third of the lease, and at most 30 s: `builds` calls a process silent after
        90 s without a beat, whatever its lease."""
        return min(max(self.lease.total_seconds() / 3, 0.05), MAX_INTERVAL)

    def beat(self) -> None:
        """Record a heartbeat and extend the leases this process holds: its claims on
        queued work, and its running actions (a slow action is not taken for abandoned)."""
        now = self.runtime.clock()
        stores = self.runtime.stores
        stores.coordination.heartbeat(self.info, now, role=self.role)
        stores.coordination.extend_work(self.info.id, now + self.lease)
        stores.tasks.extend_leases(self.info.id, now + self.lease, now=now)

    def start(self) -> None:
        self.runtime.stores.coordination.register_worker(self.info)
        self.beat()
        self._thread = threading.Thread(target=self._loop, name="relaystate-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as exc:  # the store is away: the next beat tries again
                log.warning("heartbeat failed: %s", exc)

    def stop(self) -> None:
        """Stop beating and deregister: whatever this process still holds is free at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self.runtime.stores.coordination.deregister_worker(self.info, self.runtime.clock())
