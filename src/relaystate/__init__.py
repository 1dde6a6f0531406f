"""relaystate: durable Sessions, Tasks and Actions so agents resume exactly where they stopped.

Names are imported on first use (PEP 562), so ``relaystate.cli`` starts without loading the
whole runtime; ``from relaystate import Runtime`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .edits import Cancel, Confirm, Fill, Resolve, Resume, Start
    from .errors import (
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
        StoreURLError,
        TaskLocked,
        TaskTooNew,
        TemplateError,
        VersionConflict,
    )
    from .keys import idempotency_key
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
    from .next_step import (
        AskConfirmation,
        AskSlot,
        Finished,
        InProgress,
        NeedsAttention,
        NextStep,
        Reconcile,
        RunAction,
        WaitRetry,
        WaitUser,
    )
    from .problems import Problem
    from .recovery import RecoveryReport
    from .retry import NO_RETRY, Retry
    from .runtime import Resumption, Runtime
    from .scope import Scope
    from .spec import (
        ActionContext,
        ActionSpec,
        Completes,
        Outcome,
        OutcomeUnknown,
        PermanentError,
        RejectedInput,
    )
    from .store import Stores, open_store
    from .templates import (
        Condition,
        Slot,
        Stage,
        TaskTemplate,
        all_required_slots,
        condition,
        user_confirmed,
    )
    from .turns import PendingTurn, ReplyContext, TurnResult

_WHERE = {
    "NO_RETRY": "retry",
    "Action": "model",
    "ActionContext": "spec",
    "ActionKind": "model",
    "ActionSpec": "spec",
    "ActionStatus": "model",
    "AskConfirmation": "next_step",
    "AskSlot": "next_step",
    "Cancel": "edits",
    "Completes": "spec",
    "Condition": "templates",
    "Confirm": "edits",
    "DuplicateKey": "errors",
    "Fill": "edits",
    "Finished": "next_step",
    "HistoryCompacted": "errors",
    "InProgress": "next_step",
    "InvalidInput": "errors",
    "InvalidSlot": "errors",
    "JournalEntry": "model",
    "Message": "model",
    "NeedsAttention": "next_step",
    "NextStep": "next_step",
    "NotFound": "errors",
    "Outcome": "spec",
    "OutcomeUnknown": "spec",
    "PendingTurn": "turns",
    "PermanentError": "spec",
    "Problem": "problems",
    "RejectedInput": "spec",
    "Reconcile": "next_step",
    "RecoveryReport": "recovery",
    "RelaystateError": "errors",
    "ReplyContext": "turns",
    "Resolve": "edits",
    "Resume": "edits",
    "Resumption": "runtime",
    "Retry": "retry",
    "RunAction": "next_step",
    "Runtime": "runtime",
    "SchemaTooNew": "errors",
    "TaskTooNew": "errors",
    "OtherBuild": "errors",
    "MigrationFailed": "errors",
    "Scope": "scope",
    "ScopeError": "errors",
    "Session": "model",
    "Slot": "templates",
    "Snapshot": "model",
    "Stage": "templates",
    "Start": "edits",
    "StoreURLError": "errors",
    "Stores": "store",
    "Task": "model",
    "TaskLocked": "errors",
    "TaskState": "model",
    "TaskStatus": "model",
    "TaskTemplate": "templates",
    "TemplateError": "errors",
    "TurnResult": "turns",
    "VersionConflict": "errors",
    "WaitRetry": "next_step",
    "WaitUser": "next_step",
    "all_required_slots": "templates",
    "condition": "templates",
    "idempotency_key": "keys",
    "open_store": "store",
    "user_confirmed": "templates",
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
    "WaitRetry",
    "WaitUser",
    "all_required_slots",
    "condition",
    "idempotency_key",
    "open_store",
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
