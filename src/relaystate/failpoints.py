"""Named points where a test (or a curious user) makes the process die or stall.

Set with ``RELAYSTATE_FAILPOINTS``, entries separated by ``;`` or ``,``::

    RELAYSTATE_FAILPOINTS="after_effect:create_order=crash;after_record=sleep=0.5"

A point is ``NAME`` (any action) or ``NAME:ACTION``; the effect is ``crash`` (SIGKILL to
ourselves: no cleanup, no flush, like a power cut of the process) or ``sleep=SECONDS``.
The action points follow the action protocol (:data:`POINTS`); ``before_commit`` (or
``before_commit:TASK_TYPE``) fires just before any task commit, e.g. between a turn's
decision and its one transaction; ``after_turn`` once a turn is committed, before its reply
leaves the process; ``before_vectors`` (or ``before_vectors:NAMESPACE``) in the server's
background pass, after a turn's items committed and before their vectors are made.
When the variable is unset, :func:`hit` is one dict lookup. A value that does not parse is a
:class:`~relaystate.errors.ConfigError` naming the bad entry, raised by :func:`active` (the
CLI calls it first thing) or by the first :func:`hit`, never at import.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass

from .errors import ConfigError

POINTS = ("before_record", "after_record", "before_effect", "after_effect", "after_commit")
"""The points of the action protocol, named per action."""
COMMIT_POINTS = ("before_commit", "after_turn", "before_vectors")
"""Points of every task commit, and of a conversational turn once it is committed (before it
answers: the lost response), named per task type; and of the vector pass that follows a
turn, named per namespace."""
ENV = "RELAYSTATE_FAILPOINTS"
MAX_SLEEP = 86_400.0
"""The longest stall a failpoint may ask for (a day): longer is a typo, not a test."""


@dataclass(frozen=True)
class Failpoint:
    point: str
    action: str | None
    effect: str
    seconds: float = 0.0


def parse(spec: str) -> dict[tuple[str, str | None], Failpoint]:
    """Parse the environment syntax; raises ConfigError (a ValueError) naming the bad entry."""
    table: dict[tuple[str, str | None], Failpoint] = {}
    for raw in spec.replace(",", ";").split(";"):
        entry = raw.strip()
        if not entry:
            continue
        where, sep, effect = entry.partition("=")
        if not sep:
            raise ConfigError(f"failpoint {entry!r}: expected NAME[:ACTION]=crash|sleep=SECONDS")
        point, _, action = where.strip().partition(":")
        if point not in POINTS + COMMIT_POINTS:
            known = ", ".join(POINTS + COMMIT_POINTS)
            raise ConfigError(f"failpoint {entry!r}: unknown point {point!r}; known: {known}")
        seconds = 0.0
        if effect == "crash":
            pass
        elif effect.startswith("sleep="):
            try:
                seconds = float(effect.removeprefix("sleep="))
            except ValueError:
                raise ConfigError(f"failpoint {entry!r}: sleep needs a number") from None
            if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SLEEP):
                raise ConfigError(f"failpoint {entry!r}: sleep takes 0 to {MAX_SLEEP:g} seconds")
            effect = "sleep"
        else:
            raise ConfigError(f"failpoint {entry!r}: effect must be crash or sleep=SECONDS")
        fp = Failpoint(point, action or None, effect, seconds)
        table[(fp.point, fp.action)] = fp
    return table


_active: dict[tuple[str, str | None], Failpoint] | None = None
"""The failpoints in force; None until :func:`active` has read the environment."""


def active() -> dict[tuple[str, str | None], Failpoint]:
    """The failpoints in force: ``RELAYSTATE_FAILPOINTS`` parsed on first use (a bad value
    is a ConfigError here, where a caller can report it, not an error at import)."""
    global _active
    if _active is None:
        try:
            _active = parse(os.environ.get(ENV, ""))
        except ConfigError as exc:
            raise ConfigError(f"{ENV}: {exc}") from None
    return _active


def configure(spec: str | None) -> None:
    """Replace the active failpoints (tests in one process use this instead of the env)."""
    global _active
    _active = parse(spec or "")


def hit(point: str, action: str | None = None) -> None:
    """Trigger the failpoint named ``point`` (optionally for one action) if it is set."""
    table = _active if _active is not None else active()
    if not table:
        return
    fp = table.get((point, action)) or table.get((point, None))
    if fp is None:
        return
    if fp.effect == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # SIGKILL is asynchronous on some platforms; never run on
    time.sleep(fp.seconds)
