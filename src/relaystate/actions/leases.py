"""Who holds an action, and whether that holder can still be alive.

A lease owner id encodes host, pid and the process start time, so that after a crash a
process on the same host can tell at once that the holder is gone (even if the pid was
reused) instead of waiting for the lease to run out. Holders on other hosts expire by time.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 (state) on (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces; fields after the closing parenthesis are fixed.
    return stat.rpartition(")")[2].split()


def _start_ticks(pid: int) -> str | None:
    """The process start time in clock ticks since boot (Linux), or None if unknown."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


@cache
def hostname() -> str:
    return os.uname().nodename if hasattr(os, "uname") else _socket_hostname()


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str
    nonce: str

    @property
    def id(self) -> str:
        return f"{self.host}/{self.pid}/{self.start}/{self.nonce}"

    @classmethod
    def parse(cls, owner_id: str) -> Owner | None:
        parts = owner_id.rsplit("/", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2], parts[3])

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(hostname(), pid, _start_ticks(pid) or "0", uuid.uuid4().hex[:8])


def process_alive(owner: Owner) -> bool:
    """Whether the owner's process still runs; only meaningful for owners on this host."""
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(owner.pid)
    if fields and fields[0] in ("Z", "X"):
        return False  # it has exited; only its parent has not reaped it yet (a zombie)
    ticks = fields[19] if fields is not None and len(fields) > 19 else None
    return ticks is None or owner.start == "0" or ticks == owner.start


def lease_expired(
    owner_id: str | None,
    expires_at: datetime | None,
    now: datetime,
    *,
    me: str,
    is_stopped: Callable[[str], bool] = lambda owner_id: False,
) -> bool:
    """Whether a lease no longer protects its action.

    Expired when nobody holds it, the time ran out, the holder deregistered, or the holder
    is a dead process on this host. A lease held by ``me`` is never expired to myself.
    """
    if owner_id is None:
        return True
    if owner_id == me:
        return False
    if expires_at is not None and expires_at <= now:
        return True
    if is_stopped(owner_id):
        return True
    owner = Owner.parse(owner_id)
    if owner is not None and owner.host == hostname():
        return not process_alive(owner)
    return False


def _socket_hostname() -> str:
    import socket

    return socket.gethostname()
