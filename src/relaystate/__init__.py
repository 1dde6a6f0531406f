"""relaystate: durable Sessions, Tasks and Actions so agents resume exactly where they stopped."""

from .errors import (
    DuplicateKey,
    HistoryCompacted,
    InvalidSlot,
    NotFound,
    RelaystateError,
    SchemaTooNew,
    StoreURLError,
    TaskLocked,
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
from .retry import NO_RETRY, Retry
from .runtime import RecoveryReport, Resumption, Runtime
from .spec import ActionContext, ActionSpec, Outcome, OutcomeUnknown, PermanentError
from .store import open_store
from .templates import (
    Condition,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    condition,
    user_confirmed,
)

__all__ = [
    "NO_RETRY",
    "Action",
    "ActionContext",
    "ActionKind",
    "ActionSpec",
    "ActionStatus",
    "Condition",
    "DuplicateKey",
    "HistoryCompacted",
    "InvalidSlot",
    "JournalEntry",
    "Message",
    "NotFound",
    "Outcome",
    "OutcomeUnknown",
    "PermanentError",
    "RecoveryReport",
    "RelaystateError",
    "Resumption",
    "Retry",
    "Runtime",
    "SchemaTooNew",
    "Session",
    "Slot",
    "Snapshot",
    "Stage",
    "StoreURLError",
    "Task",
    "TaskLocked",
    "TaskState",
    "TaskStatus",
    "TaskTemplate",
    "TemplateError",
    "VersionConflict",
    "all_required_slots",
    "condition",
    "idempotency_key",
    "open_store",
    "user_confirmed",
]
