"""How one action is declared: its function, its safety properties, check and compensation.

``side_effect`` says the action changes the world; ``idempotent`` says the downstream
deduplicates by the idempotency key, so a retry with the same key is safe; ``check`` asks the
downstream what really happened; ``compensate`` undoes a success when a later step fails
for good (saga).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model import Task
from .retry import Retry

JSON = Any


PROGRAMMING_ERRORS: tuple[type[Exception], ...] = (
    NameError,
    TypeError,
    AttributeError,
    ImportError,
    SyntaxError,
    NotImplementedError,
    AssertionError,
    RecursionError,
)
"""Exceptions that say the action's own code is wrong, not that the downstream failed (a
typo, a missing import, a wrong argument): the action is not retried and its task waits for
a person, who fixes the code and reruns it (``relaystate tasks rerun``) or resolves it.
``Retry(retry_on=...)`` lists any of them that a downstream's client really raises for a
passing failure."""


class PermanentError(Exception):
    """Raised by an action: the downstream refused for good; do not retry."""


class OutcomeUnknown(Exception):
    """Raised by an action: it may or may not have taken effect (like a timeout)."""


class RejectedInput(PermanentError):
    """Raised by an action: the downstream refused one slot's value, and nothing took effect
    (an unknown order number, an amount above the order's total).

    The task does not fail: the slot is cleared, the task goes back to collecting and asks
    for it again with ``reason`` (a :class:`~relaystate.task.problems.Problem` says it in the
    user's language). Only while no side effect has landed; after one, it is a failure.
    """

    def __init__(self, slot: str, reason: str) -> None:
        self.slot = slot
        self.reason = reason
        super().__init__(f"{slot}: {reason}")


@dataclass(frozen=True)
class Completes:
    """What a read-only action returns when it also completes slots the user gave by a word
    rather than a value ("全退", "refund it all": the amount is the order's total).

    ``output`` is the action's output as usual; ``slots`` are written onto the task in the
    same commit (journaled like any change). Ignored for actions with a side effect.
    """

    output: Any
    slots: Mapping[str, Any]


@dataclass(frozen=True)
class ActionContext:
    """What an action function receives; everything it needs to act and to be idempotent."""

    task_id: str
    user_id: str
    seq: int
    name: str
    attempt: int
    idempotency_key: str
    input: Mapping[str, JSON]
    slots: Mapping[str, JSON]
    outputs: Mapping[str, JSON] = field(default_factory=dict)
    original_output: JSON = None
    """For a compensation: the output of the action being undone."""


@dataclass(frozen=True)
class Outcome:
    """What a ``check`` learned from the downstream about an action with an unknown outcome.

    ``succeeded``: it took effect (with its output). ``not_found``: it never took effect, so
    running it again is safe. ``failed``: the downstream rejected it. ``pending``: still in
    flight downstream; check again later.
    """

    state: Literal["succeeded", "not_found", "failed", "pending"]
    output: JSON = None
    reason: str = ""

    @classmethod
    def succeeded(cls, output: JSON = None) -> Outcome:
        return cls("succeeded", output)

    @classmethod
    def not_found(cls, reason: str = "") -> Outcome:
        return cls("not_found", reason=reason)

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls("failed", reason=reason)

    @classmethod
    def pending(cls, reason: str = "") -> Outcome:
        return cls("pending", reason=reason)


ActionFn = Callable[[ActionContext], JSON]
CheckFn = Callable[[ActionContext], Outcome]
InputFn = Callable[[Task, Mapping[str, JSON]], Mapping[str, JSON]]


class ActionSpec:
    """A declared action; call ``.check`` and ``.compensate`` on it as decorators."""

    def __init__(
        self,
        name: str,
        fn: ActionFn,
        *,
        side_effect: bool = False,
        idempotent: bool = False,
        retry: Retry | None = None,
        timeout: float | None = None,
        input: InputFn | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"action {name!r}: timeout must be positive")
        self.name = name
        self.fn = fn
        self.side_effect = side_effect
        self.idempotent = idempotent
        self.retry = retry or Retry()
        self.timeout = timeout
        self.input_fn = input
        self.check_fn: CheckFn | None = None
        self.compensate_fn: ActionFn | None = None

    def __call__(self, ctx: ActionContext) -> JSON:
        return self.fn(ctx)

    def __repr__(self) -> str:
        return f"ActionSpec({self.name!r}, side_effect={self.side_effect})"

    def check(self, fn: CheckFn) -> CheckFn:
        """Declare how to ask the downstream what happened to this action."""
        self.check_fn = fn
        return fn

    def compensate(self, fn: ActionFn) -> ActionFn:
        """Declare how to undo this action's effect when a later step fails for good."""
        self.compensate_fn = fn
        return fn

    @property
    def safe_to_repeat(self) -> bool:
        """Whether re-running with the same key cannot duplicate an effect."""
        return not self.side_effect or self.idempotent

    def input_for(self, task: Task, outputs: Mapping[str, JSON]) -> dict[str, JSON]:
        """The input recorded with the action (by default the task's slots)."""
        if self.input_fn is None:
            return dict(task.slots)
        return dict(self.input_fn(task, outputs))

    def compensation(self) -> ActionSpec:
        """The compensation as an action of its own (recorded, keyed and retried the same)."""
        assert self.compensate_fn is not None
        return ActionSpec(
            f"{self.name}.compensate",
            self.compensate_fn,
            side_effect=True,
            idempotent=True,
            retry=self.retry,
            timeout=self.timeout,
        )
