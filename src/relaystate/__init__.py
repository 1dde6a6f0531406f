"""relaystate: durable Sessions, Tasks and Actions so agents resume exactly where they stopped.

Names are imported on first use (PEP 562), so ``relaystate.cli`` starts without loading the
whole runtime; ``from relaystate import Runtime`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import VERSION as __version__  # noqa: F401  (the package's version, as usual)

if TYPE_CHECKING:
    from .actions.idempotency import idempotency_key
    from .errors import (
        Conflict,
        DuplicateKey,
        HistoryCompacted,
        InvalidInput,
        InvalidSlot,
        MigrationFailed,
        NotFound,
        OtherBuild,
        RelaystateError,
        SchemaTooNew,
        ScopeError,
        StoreError,
        StoreURLError,
        TaskLocked,
        TaskTooNew,
        TemplateError,
        VersionConflict,
    )
    from .model import (
        Action,
        ActionKind,
        ActionStatus,
        JournalEntry,
        Message,
        Session,
        Snapshot,
        Task,
        TaskState,
        TaskStatus,
    )
    from .runtime.recovery import RecoveryReport
    from .runtime.runtime import Resumption, Runtime
    from .runtime.turns import PendingTurn, ReplyContext, TurnResult
    from .scope import Scope
    from .store import Stores, open_store
    from .task.edits import Cancel, Confirm, Fill, Rerun, Resolve, Resume, Start
    from .task.next_step import (
        AskConfirmation,
        AskSlot,
        Finished,
        InProgress,
        NeedsAttention,
        NextStep,
        Reconcile,
        RunAction,
        WaitOperator,
        WaitRetry,
        WaitUser,
    )
    from .task.problems import Problem
    from .task.retry import NO_RETRY, Retry
    from .task.spec import (
        ActionContext,
        ActionSpec,
        Completes,
        Outcome,
        OutcomeUnknown,
        PermanentError,
        RejectedInput,
    )
    from .task.templates import (
        Condition,
        Slot,
        Stage,
        TaskTemplate,
        all_required_slots,
        condition,
        operator_sets,
        user_confirmed,
    )

_WHERE = {
    "NO_RETRY": "task.retry",
    "Action": "model",
    "ActionContext": "task.spec",
    "ActionKind": "model",
    "ActionSpec": "task.spec",
    "ActionStatus": "model",
    "AskConfirmation": "task.next_step",
    "AskSlot": "task.next_step",
    "Cancel": "task.edits",
    "Completes": "task.spec",
    "Condition": "task.templates",
    "Conflict": "errors",
    "Confirm": "task.edits",
    "DuplicateKey": "errors",
    "Fill": "task.edits",
    "Finished": "task.next_step",
    "HistoryCompacted": "errors",
    "InProgress": "task.next_step",
    "InvalidInput": "errors",
    "InvalidSlot": "errors",
    "JournalEntry": "model",
    "Message": "model",
    "NeedsAttention": "task.next_step",
    "NextStep": "task.next_step",
    "NotFound": "errors",
    "Outcome": "task.spec",
    "OutcomeUnknown": "task.spec",
    "PendingTurn": "runtime.turns",
    "PermanentError": "task.spec",
    "Problem": "task.problems",
    "RejectedInput": "task.spec",
    "Reconcile": "task.next_step",
    "RecoveryReport": "runtime.recovery",
    "RelaystateError": "errors",
    "ReplyContext": "runtime.turns",
    "Rerun": "task.edits",
    "Resolve": "task.edits",
    "Resume": "task.edits",
    "Resumption": "runtime.runtime",
    "Retry": "task.retry",
    "RunAction": "task.next_step",
    "Runtime": "runtime.runtime",
    "SchemaTooNew": "errors",
    "TaskTooNew": "errors",
    "OtherBuild": "errors",
    "MigrationFailed": "errors",
    "Scope": "scope",
    "ScopeError": "errors",
    "Session": "model",
    "Slot": "task.templates",
    "Snapshot": "model",
    "Stage": "task.templates",
    "Start": "task.edits",
    "StoreError": "errors",
    "StoreURLError": "errors",
    "Stores": "store",
    "Task": "model",
    "TaskLocked": "errors",
    "TaskState": "model",
    "TaskStatus": "model",
    "TaskTemplate": "task.templates",
    "TemplateError": "errors",
    "TurnResult": "runtime.turns",
    "VersionConflict": "errors",
    "WaitRetry": "task.next_step",
    "WaitOperator": "task.next_step",
    "WaitUser": "task.next_step",
    "all_required_slots": "task.templates",
    "condition": "task.templates",
    "idempotency_key": "actions.idempotency",
    "open_store": "store",
    "operator_sets": "task.templates",
    "user_confirmed": "task.templates",
}

__all__ = [
    "NO_RETRY",
    "Action",
    "ActionContext",
    "ActionKind",
    "ActionSpec",
    "ActionStatus",
    "AskConfirmation",
    "AskSlot",
    "Cancel",
    "Completes",
    "Condition",
    "Confirm",
    "Conflict",
    "DuplicateKey",
    "Fill",
    "Finished",
    "HistoryCompacted",
    "InProgress",
    "InvalidInput",
    "InvalidSlot",
    "JournalEntry",
    "Message",
    "MigrationFailed",
    "NeedsAttention",
    "NextStep",
    "NotFound",
    "OtherBuild",
    "Outcome",
    "OutcomeUnknown",
    "PendingTurn",
    "PermanentError",
    "Problem",
    "Reconcile",
    "RecoveryReport",
    "RejectedInput",
    "RelaystateError",
    "ReplyContext",
    "Rerun",
    "Resolve",
    "Resume",
    "Resumption",
    "Retry",
    "RunAction",
    "Runtime",
    "SchemaTooNew",
    "Scope",
    "ScopeError",
    "Session",
    "Slot",
    "Snapshot",
    "Stage",
    "Start",
    "StoreError",
    "StoreURLError",
    "Stores",
    "Task",
    "TaskLocked",
    "TaskState",
    "TaskStatus",
    "TaskTemplate",
    "TaskTooNew",
    "TemplateError",
    "TurnResult",
    "VersionConflict",
    "WaitOperator",
    "WaitRetry",
    "WaitUser",
    "all_required_slots",
    "condition",
    "idempotency_key",
    "open_store",
    "operator_sets",
    "user_confirmed",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # next time, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
