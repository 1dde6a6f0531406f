"""The errors relaystate raises on purpose; each carries a message fit to show a person.

Catch a base to handle a family at once (``except Conflict``: re-read and try again); the
HTTP API answers by the base (404, 409, 422, 503...) and names the class in its ``code``.

* RelaystateError
  + NotFound                  no such Session/Task/Action for this user (HTTP 404)
  + HistoryCompacted          that point of a task's history was folded away (410)
  + Conflict                  the state changed, or the request conflicts with it (409)
    - VersionConflict, SessionConflict, ConfirmationChanged, TaskLocked, MigrationFailed,
      DuplicateKey, RepeatedRequest, RequestKeyReused, TemplateMismatch
  + InvalidInput, InvalidSlot, TemplateError   the request can never succeed as it is (422)
  + ScopeError                an operator's call made with a user's scope (403)
  + StoreError                the store cannot be used now; nothing was written (503)
    - StoreUnavailable        the database server is away
    - StoreFileError          a SQLite file that cannot be used as it is
      StoreMissing, StoreNotDatabase, StoreCorrupt, StoreReadOnly, StoreFull
  + SchemaTooNew              stored state of a newer build (503)
    - OtherBuild > TaskTooNew
  + StoreURLError, ConfigError   a setting that cannot be used (400; the CLI exits 2)
"""

from __future__ import annotations

from datetime import datetime


class RelaystateError(Exception):
    """Base of every deliberate relaystate error."""


class NotFound(RelaystateError):
    """No such Session/Task/Action for this user (another user's ids look the same as none)."""


class Conflict(RelaystateError):
    """The request conflicts with what is stored now: the Task or Session changed since it
    was read, the Task can no longer take this change, or a key is already taken. Nothing
    was written; read again and decide again (HTTP 409)."""


class StoreError(RelaystateError):
    """The store cannot be used right now (its server is away, its file is unusable or the
    disk is full): nothing of the failed call was written (HTTP 503)."""


class VersionConflict(Conflict):
    """A task changed since it was read; re-read and retry (HTTP 409)."""

    def __init__(self, task_id: str, expected: int, actual: int | None = None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        found = "it does not exist" if actual is None else f"it is at version {actual}"
        super().__init__(f"task {task_id} changed: expected version {expected}, {found}")


class SessionConflict(Conflict):
    """A session changed since its turn read it (another turn in the same session committed
    first); nothing of this turn was written: read again and redo the turn (HTTP 409)."""

    def __init__(self, session_id: str, expected: int) -> None:
        self.session_id = session_id
        self.expected = expected
        super().__init__(f"session {session_id} changed since version {expected}; redo the turn")


class ConfirmationChanged(Conflict):
    """A yes answered a summary of the task at ``seen``, but the task has changed since (now
    at ``version``, say from another device): nothing is confirmed; show it again (HTTP 409)."""

    def __init__(self, task_id: str, seen: int, version: int) -> None:
        self.task_id = task_id
        self.seen = seen
        self.version = version
        super().__init__(
            f"task {task_id} changed after its summary was shown (version {seen}, now "
            f"{version}): the details changed, please check them again"
        )


class DuplicateKey(Conflict):
    """An idempotency key is already used by another action."""


class InvalidSlot(RelaystateError):
    """A slot value failed validation; ``reason`` says why, for asking again (a
    :class:`~relaystate.task.problems.Problem` where the code knows what kind of problem)."""

    def __init__(self, slot: str, reason: str) -> None:
        self.slot = slot
        self.reason = reason
        super().__init__(f"slot {slot!r}: {reason}")


class TaskLocked(Conflict):
    """The task can no longer take this change (actions ran, or it is finished).

    ``code`` says why, for a reply in the user's language: "finished", "effect" (a side
    effect is recorded: slots and confirmation are locked), "running" (an action is in
    flight), "took_effect" (too late to cancel), "settled" (nothing to resolve).
    """

    def __init__(self, message: str, *, code: str = "locked", action: str | None = None) -> None:
        self.code = code
        self.action = action
        super().__init__(message)


class TemplateError(RelaystateError):
    """A task template is declared wrongly, or a task's template is unknown here."""


class SchemaTooNew(RelaystateError):
    """Stored state was written by a newer relaystate than this one; refuse to touch it."""


class OtherBuild(SchemaTooNew):
    """Another build serves this task now (it is pinned to that build's template version,
    or an action of it is running there on a version this build does not carry): this
    build writes nothing and leaves it to that build; a proxy may ask another process.
    ``until``: when to try again here, if known (the running action's lease)."""

    def __init__(self, message: str, *, until: datetime | None = None) -> None:
        super().__init__(message)
        self.until = until


class TaskTooNew(OtherBuild):
    """A task was started or migrated by a newer build (a template version this build does
    not know): this build leaves it to that build, and writes nothing."""


class MigrationFailed(Conflict):
    """Lifting a stored task to the template version this build runs failed: the task is
    left as it was (marked as needing attention, with the reason)."""


class HistoryCompacted(RelaystateError):
    """The requested point of a task's history was folded into a later baseline."""


class StoreURLError(RelaystateError):
    """A store URL that no backend understands."""


class StoreUnavailable(StoreError):
    """The database a store URL names cannot be reached (down, refused, bad credentials)."""


class ScopeError(RelaystateError):
    """A call was made without the scope it needs (a user where admin is required)."""


class RepeatedRequest(Conflict):
    """Another request with the same key committed its turn first (a client retried while
    the first was still running); nothing of this one was written: read that turn back."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"a turn with request key {key!r} is already committed")


class RequestKeyReused(Conflict):
    """A request key already answered a different request (other words, another session):
    a key names one request, so it cannot be used again for another. HTTP 409: the request
    itself is valid, it conflicts with what the key already names (the IETF draft on
    Idempotency-Key suggests 422; here 422 means a request that could never succeed)."""

    def __init__(self, key: str, why: str) -> None:
        self.key = key
        super().__init__(f"request key {key!r} was used for {why}; use a new key")


class InvalidInput(RelaystateError, ValueError):
    """An argument from outside that the runtime refuses before anything is read or written:
    ``field`` names it ("text", "session_id", "slots['amount']"), ``problem`` says what is
    wrong. Also a ValueError, so callers that caught bad arguments as ValueError still do."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class ConfigError(RelaystateError, ValueError):
    """A setting relaystate cannot use: an environment variable (``RELAYSTATE_NOW``,
    ``RELAYSTATE_FAILPOINTS``...), a command's option, or an ``--app`` that is no template
    factory. The message names the setting and says what it takes. Also a ValueError, as
    these were before they had a type of their own."""


class StoreFileError(StoreError):
    """A SQLite file (the store, or the demo ledger) that cannot be used as it is: ``path``
    names it, the message says what is wrong and what to do. Raised before anything is
    written, or after SQLite refused a write (then that write did not happen)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


class StoreMissing(StoreFileError):
    """The file does not exist and the caller only reads: reading never creates a store."""


class StoreNotDatabase(StoreFileError):
    """The file is not a relaystate database: not SQLite at all, empty, or another
    application's database (which relaystate must not add its tables to)."""


class StoreCorrupt(StoreFileError):
    """The file is a damaged SQLite database: malformed pages, truncated, a broken header."""


class StoreReadOnly(StoreFileError):
    """The file, its directory or its file system cannot be written: nothing was written."""


class StoreFull(StoreFileError):
    """The disk (or a quota) holding the file is full: the change in progress was not written;
    what was committed before it is intact."""


class TemplateMismatch(Conflict):
    """A Task was made by another definition of its template's type and version than this
    process declares (another program shares the store, or the template changed without a
    new version): this process writes nothing to it. Reading it still works (HTTP 409)."""

    def __init__(self, task_id: str, template: str, version: int, stored: str, here: str):
        self.task_id = task_id
        self.template = template
        self.version = version
        self.stored = stored
        self.here = here
        super().__init__(
            f"task {task_id} was made by another definition of template {template!r} "
            f"version {version} (fingerprint {stored}) than this process declares "
            f"(fingerprint {here}); nothing was written. Give the changed definition a new "
            f"version (version={version + 1}) with a migration from version {version} "
            f"(@template.migration(from_version={version})), or run this task with the "
            "definition that made it"
        )


CODES: dict[type[RelaystateError], str] = {
    NotFound: "not_found",
    HistoryCompacted: "history_compacted",
    Conflict: "conflict",
    VersionConflict: "version_conflict",
    SessionConflict: "session_conflict",
    ConfirmationChanged: "confirmation_changed",
    TaskLocked: "task_locked",
    MigrationFailed: "migration_failed",
    TemplateMismatch: "template_mismatch",
    DuplicateKey: "duplicate_key",
    RepeatedRequest: "repeated_request",
    RequestKeyReused: "idempotency_key_reused",  # a valid request, a taken key
    InvalidInput: "invalid_input",
    InvalidSlot: "invalid_slot",
    TemplateError: "invalid_task_type",
    ScopeError: "forbidden",
    StoreError: "unavailable",
    TaskTooNew: "task_too_new",
    OtherBuild: "other_build",
    SchemaTooNew: "unavailable",
    RelaystateError: "bad_request",
}
"""Each error's ``code`` in the HTTP API's error bodies (its own class's, else its nearest
base's): stable names a client reads back into these classes (``relaystate.client``)."""


def code_of(exc: BaseException) -> str:
    """The code of an error: its class's, else its nearest base's (``bad_request``)."""
    return next((CODES[k] for k in type(exc).__mro__ if k in CODES), "bad_request")
