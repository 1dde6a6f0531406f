"""Retry policy with exponential backoff, declared per action (as in Temporal's activities)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Retry:
    """How often an action may be attempted and how long to wait between attempts.

    ``max_attempts`` counts the first attempt: 1 means never retry. ``jitter`` is the
    fraction of each delay that is randomised, so that many tasks retrying after one outage
    do not hit the downstream in lockstep. Retries are for what a downstream raises: a
    programming error of the action's own code (``spec.PROGRAMMING_ERRORS``: NameError,
    TypeError, AttributeError...) stops the action at once, unless its type is in
    ``retry_on``.
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    multiplier: float = 2.0
    max_interval: float = 60.0
    jitter: float = 0.0
    retry_on: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("Retry.max_attempts must be at least 1")
        if self.initial_interval < 0 or self.max_interval < 0:
            raise ValueError("Retry intervals must not be negative")
        if self.multiplier < 1:
            raise ValueError("Retry.multiplier must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("Retry.jitter must be between 0 and 1")
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in self.retry_on):
            raise ValueError("Retry.retry_on takes exception types, such as (TypeError,)")

    def can_retry(self, attempts: int) -> bool:
        """Whether another attempt is allowed after ``attempts`` attempts."""
        return attempts < self.max_attempts

    def delay(self, attempts: int, rng: random.Random | None = None) -> timedelta:
        """The wait before the next attempt, after ``attempts`` (>= 1) attempts."""
        base = min(
            self.initial_interval * self.multiplier ** max(attempts - 1, 0), self.max_interval
        )
        if self.jitter:
            spread = base * self.jitter
            base = base - spread + (rng or random).random() * 2 * spread
        return timedelta(seconds=max(base, 0.0))


NO_RETRY = Retry(max_attempts=1)
