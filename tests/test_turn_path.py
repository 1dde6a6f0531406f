"""One turn, one transaction, through the runtime.

Write transactions are counted where the database can tell: on SQLite through a tracing
connection (every statement the store sends), on PostgreSQL through transaction ids (a
transaction gets an id only when it writes; every row remembers the id that wrote it). A
crash between deciding and committing is a real SIGKILLed ``relaystate say`` process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relaystate import Runtime, Scope, TaskStatus, open_store
from relaystate.conversation import Conversation
from relaystate.demo import Ledger, templates
from relaystate.model import ApiKey
from relaystate.store import SQLiteStore

from .services import PostgresCluster
from .support import Clock
from .tracing import Traced

NOW = "2026-11-29T10:00:00"
ALICE = Scope.user("alice")
FILL_TWO = "next Wednesday, business class"
"""A turn that fills two slots of the flight booking and asks the next question."""


@pytest.fixture(autouse=True)
def pinned_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", NOW)


@pytest.fixture
def sqlite_conv(tmp_path: Path) -> Iterator[tuple[Conversation, Traced, Clock]]:
    clock = Clock()
    store = open_store(f"sqlite:///{tmp_path}/turns.db")
    rt = Runtime(store, templates(tmp_path / "ledger.db"), clock=clock)
    assert isinstance(store.tasks, SQLiteStore)
    yield Conversation(rt), Traced(store.tasks), clock
    rt.close()


def test_a_slot_filling_turn_is_one_write_transaction_on_sqlite(
    sqlite_conv: tuple[Conversation, Traced, Clock],
) -> None:
    conv, traced, clock = sqlite_conv
    first = conv.handle(ALICE, "I'd like to book a flight from Beijing to Shanghai", "s1")
    (tx,) = traced.writes()  # the new task, its journal, the new session, both messages
    assert [traced.kind(s) for s in tx] == [
        "INSERT tasks",
        "INSERT journal",
        "INSERT sessions",
        "INSERT messages",
        "INSERT messages",
    ]
    assert first.reply in tx[-1] and "Beijing to Shanghai" in tx[-2]

    clock.advance(minutes=2)  # the session row is due for a touch (its expiry slides)
    traced.clear()
    turn = conv.handle(ALICE, FILL_TWO, "s1")
    assert turn.reply == "Who is travelling?"
    assert turn.state is not None and turn.state.task.slots["cabin_class"] == "business"
    (tx,) = traced.writes()
    assert [traced.kind(s) for s in tx] == [
        "UPDATE tasks",
        "INSERT journal",
        "INSERT sessions",
        "INSERT messages",
        "INSERT messages",
    ]
    assert FILL_TWO in tx[-2] and turn.reply in tx[-1]  # the reply is in the same transaction
    # The turn read its session, its open tasks and their actions in one statement, once.
    (read,) = traced.reads()
    assert all(f" {table} " in read for table in ("sessions", "tasks", "actions"))

    traced.clear()  # within a minute, an unchanged session is not rewritten at all
    conv.handle(ALICE, "economy please", "s1")
    (tx,) = traced.writes()
    assert not any("sessions" in s for s in tx) and len(tx) == 4

    traced.clear()  # a summary to confirm is remembered in the session, in the same commit
    shown = conv.handle(ALICE, "Alice Wang", "s1")
    (tx,) = traced.writes()
    assert [traced.kind(s) for s in tx] == [
        "UPDATE tasks",
        "INSERT journal",
        "INSERT sessions",
        "INSERT messages",
        "INSERT messages",
    ]
    assert shown.state is not None
    session = conv.runtime.session(ALICE, "s1")
    assert session.context["shown"] == {shown.state.task.id: shown.state.task.version}


def test_actions_add_only_their_own_commits(
    sqlite_conv: tuple[Conversation, Traced, Clock], tmp_path: Path
) -> None:
    conv, traced, _ = sqlite_conv
    for text in ("book a flight from Beijing to Shanghai", FILL_TWO, "Alice Wang"):
        conv.handle(ALICE, text, "s1")
    traced.clear()
    turn = conv.handle(ALICE, "yes", "s1")
    assert turn.state is not None and turn.state.task.status == TaskStatus.DONE
    assert [a.name for a in turn.actions] == ["search_flights", "create_order"]
    # The yes + the first claim; its result + the second claim; its result + the reply.
    txs = traced.writes()
    assert len(txs) == 1 + len(turn.actions)
    assert "INSERT INTO actions" in " ".join(txs[0]) and "'yes'" in " ".join(txs[0])
    assert turn.reply in " ".join(txs[-1])
    assert len(Ledger(tmp_path / "ledger.db").entries()) == 1


def test_a_slot_filling_turn_is_one_write_transaction_on_postgres(
    pg_cluster: PostgresCluster, tmp_path: Path
) -> None:
    """On a cluster of its own: transaction ids are counted cluster-wide, so any other
    test's background writer in a shared cluster would count too."""
    import psycopg

    postgres_url = pg_cluster.url
    clock = Clock()
    rt = Runtime(open_store(postgres_url), templates(tmp_path / "ledger.db"), clock=clock)
    conv = Conversation(rt)
    with psycopg.connect(postgres_url, autocommit=True) as pg:

        def next_xid() -> int:
            row = pg.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
            assert row is not None
            return int(row[0])

        first = conv.handle(ALICE, "I'd like to book a flight from Beijing to Shanghai", "s1")
        assert first.state is not None
        clock.advance(minutes=2)
        before = next_xid()
        turn = conv.handle(ALICE, FILL_TWO, "s1")
        assert next_xid() - before == 1  # one transaction wrote; reads assign no id
        writers = pg.execute(
            "SELECT xmin::text FROM tasks WHERE id = %(t)s"
            " UNION ALL SELECT xmin::text FROM journal WHERE task_id = %(t)s AND version = 2"
            " UNION ALL SELECT xmin::text FROM sessions WHERE id = 's1'"
            " UNION ALL SELECT xmin::text FROM messages WHERE session_id = 's1' AND id > 2",
            {"t": first.state.task.id},
        ).fetchall()
        assert len(writers) == 5 and len({w[0] for w in writers}) == 1  # all by that one
        texts = pg.execute("SELECT text FROM messages WHERE session_id = 's1' ORDER BY id")
        assert [r[0] for r in texts.fetchall()][2:] == [FILL_TWO, turn.reply]
    rt.close()


# -- a crash between deciding and committing ----------------------------------------------------
def _say(
    tmp_path: Path, text: str, failpoints: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RELAYSTATE_FAILPOINTS"}
    if failpoints:
        env["RELAYSTATE_FAILPOINTS"] = failpoints
    args = ["say", "--user", "alice", "--session", "s1", "--json", text]
    args += ["--store", f"sqlite:///{tmp_path}/crash.db", "--ledger", str(tmp_path / "l.db")]
    return subprocess.run(
        [sys.executable, "-m", "relaystate.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _stored(tmp_path: Path) -> dict[str, Any]:
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/crash.db"), templates(tmp_path / "l.db"))
    try:
        (task,) = rt.tasks(ALICE)
        _, journal = rt.history(ALICE, task.id)
        return {
            "task": task.to_dict(),
            "actions": [a.to_dict() for a in rt.task(ALICE, task.id).actions],
            "journal": [e.to_dict() for e in journal],
            "session": rt.session(ALICE, "s1").to_dict(),
            "messages": [m.to_dict() for m in rt.messages(ALICE, "s1", limit=100)],
        }
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("text", "then"),
    [(FILL_TWO, "Who is travelling?"), ("yes", "Done: your flight booking is complete")],
)
def test_a_crash_between_decide_and_commit_loses_the_whole_turn(
    tmp_path: Path, text: str, then: str
) -> None:
    setup = ["book a flight from Beijing to Shanghai"]
    if text == "yes":
        setup += [FILL_TWO, "Alice Wang"]
    for line in setup:
        assert _say(tmp_path, line).returncode == 0
    before = _stored(tmp_path)

    crashed = _say(tmp_path, text, "before_commit:flight_booking=crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert _stored(tmp_path) == before  # nothing of the turn: no task change, no message
    assert Ledger(tmp_path / "l.db").entries() == []

    again = _say(tmp_path, text)  # the user says it again: the turn happens once, in full
    assert again.returncode == 0, again.stderr
    assert then in again.stdout
    after = _stored(tmp_path)
    assert after["task"]["version"] > before["task"]["version"]
    assert [e["version"] for e in after["journal"]] == list(range(1, after["task"]["version"] + 1))
    assert [m["text"] for m in after["messages"]][len(before["messages"]) :][0] == text
    assert len(after["messages"]) == len(before["messages"]) + 2
    if text == "yes":
        assert [(e["requests"], e["effects"]) for e in Ledger(tmp_path / "l.db").entries()] == [
            (1, 1)
        ]


T0 = datetime(2026, 11, 29, tzinfo=UTC)


# -- scope: required everywhere, never widened ------------------------------------------------
CALLS: dict[str, Callable[[Runtime, Any, str], Any]] = {
    "open_session": lambda rt, s, t: rt.open_session(s, "s9"),
    "session": lambda rt, s, t: rt.session(s, "s1"),
    "messages": lambda rt, s, t: rt.messages(s, "s1"),
    "said": lambda rt, s, t: rt.said(s, "k-1"),
    "begin_turn": lambda rt, s, t: rt.begin_turn(s, "s1", "hello"),
    "start": lambda rt, s, t: rt.start(s, "flight_booking"),
    "fill": lambda rt, s, t: rt.fill(s, t, {"destination": "Tokyo"}),
    "confirm": lambda rt, s, t: rt.confirm(s, t),
    "cancel": lambda rt, s, t: rt.cancel(s, t),
    "resolve": lambda rt, s, t: rt.resolve(s, t, 1, succeeded=True),
    "rerun": lambda rt, s, t: rt.rerun(s, t, 1),
    "unpin": lambda rt, s, t: rt.unpin(s, t, reason="its build is gone"),
    "advance": lambda rt, s, t: rt.advance(s, t),
    "resume": lambda rt, s, t: rt.resume(s, t),
    "apply": lambda rt, s, t: rt.apply(s, __import__("relaystate").Resume(t)),
    "task": lambda rt, s, t: rt.task(s, t),
    "task_id": lambda rt, s, t: rt.task_id(s, t[:8]),
    "task_counts": lambda rt, s, t: rt.task_counts(s),
    "tasks": lambda rt, s, t: rt.tasks(s),
    "open_tasks": lambda rt, s, t: rt.open_tasks(s),
    "recover": lambda rt, s, t: rt.recover(s),
    "history": lambda rt, s, t: rt.history(s, t),
    "replay": lambda rt, s, t: rt.replay(s, t),
    "compact": lambda rt, s, t: rt.compact(s),
    "live_session": lambda rt, s, t: rt.live_session(s, "s1"),
    "schema_status": lambda rt, s, t: rt.schema_status(s),
    "upgrade_schema": lambda rt, s, t: rt.upgrade_schema(s),
    "durability_warnings": lambda rt, s, t: rt.durability_warnings(s),
    "action": lambda rt, s, t: rt.action(s, "a1"),
    "add_api_key": lambda rt, s, t: rt.add_api_key(s, ApiKey("k1", "alice", "k", False, "h", T0)),
    "api_keys": lambda rt, s, t: rt.api_keys(s),
    "revoke_api_keys": lambda rt, s, t: rt.revoke_api_keys(s, user_id="alice"),
    "upgraded": lambda rt, s, t: rt.upgraded(s, []),
    "migrate": lambda rt, s, t: rt.migrate(s, dry_run=True),
    "requeue": lambda rt, s, t: rt.requeue(s),
    "builds": lambda rt, s, t: rt.builds(s),
    "workers": lambda rt, s, t: rt.workers(s),
}
# api_key finds a caller's key before any scope exists (the server's sign-in)
UNSCOPED = {
    "register",
    "close",
    "template_of",
    "next_step",
    "max_inline_wait",
    "max_text",
    "api_key",
    "runs_here",
    "worker_info",
    "labels",
}
"""Public names that touch no user's data."""


@pytest.fixture
def owned(tmp_path: Path) -> Iterator[tuple[Runtime, str]]:
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/scope.db"), templates(tmp_path / "l.db"))
    state = rt.start(ALICE, "flight_booking", slots={"origin": "Beijing"}, session_id="s1")
    yield rt, state.task.id
    rt.close()


def test_every_public_runtime_method_is_listed_here() -> None:
    public = {n for n in dir(Runtime) if not n.startswith("_")}
    assert public == set(CALLS) | UNSCOPED


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("scope", [None, "alice", ""], ids=["none", "bare-user-id", "empty"])
def test_every_runtime_method_refuses_a_missing_scope(
    owned: tuple[Runtime, str], name: str, scope: Any
) -> None:
    rt, task_id = owned
    before = rt.task(ALICE, task_id).to_dict()
    with pytest.raises(TypeError, match="a Scope is required"):
        CALLS[name](rt, scope, task_id)
    assert rt.task(ALICE, task_id).to_dict() == before


READS_BY_ID = ("fill", "confirm", "cancel", "advance", "resume", "apply", "task", "history")


@pytest.mark.parametrize("name", [*READS_BY_ID, "replay", "session"])
def test_another_users_ids_answer_not_found(owned: tuple[Runtime, str], name: str) -> None:
    from relaystate import NotFound

    rt, task_id = owned
    before = rt.task(ALICE, task_id).to_dict()
    with pytest.raises(NotFound):
        CALLS[name](rt, Scope.user("mallory"), task_id)
    assert rt.task(ALICE, task_id).to_dict() == before


def test_another_user_can_neither_list_nor_join_a_session(owned: tuple[Runtime, str]) -> None:
    from relaystate import NotFound

    rt, task_id = owned
    mallory = Scope.user("mallory")
    rt.open_session(ALICE, "s1")
    assert rt.tasks(mallory) == [] and rt.messages(mallory, "s1") == []
    with pytest.raises(NotFound):  # a turn in alice's session id commits nothing for mallory
        Conversation(rt).handle(mallory, "continue", "s1")
    assert rt.messages(ALICE, "s1") == []
    assert rt.session(ALICE, "s1").active_task_ids == [task_id]


@pytest.mark.parametrize(
    "name",
    [
        *("resolve", "rerun", "unpin", "compact", "recover", "schema_status"),
        *("upgrade_schema", "durability_warnings"),
    ],
)
def test_operator_work_needs_an_admin_scope(owned: tuple[Runtime, str], name: str) -> None:
    from relaystate import ScopeError

    rt, task_id = owned
    with pytest.raises(ScopeError, match="admin"):
        CALLS[name](rt, ALICE, task_id)


@pytest.mark.parametrize("name", ["start", "open_session", "begin_turn"])
def test_what_a_user_owns_is_not_created_by_admin(owned: tuple[Runtime, str], name: str) -> None:
    from relaystate import ScopeError

    rt, task_id = owned
    with pytest.raises(ScopeError, match="belongs to a user"):
        CALLS[name](rt, Scope.admin("ops"), task_id)


def test_scopes_are_built_explicitly() -> None:
    from relaystate import ScopeError

    assert Scope.user("alice").actor == "user:alice" and Scope.admin("cli").actor == "admin:cli"
    assert Scope.admin("cli").admits("anyone") and not Scope.user("a").admits("b")
    with pytest.raises(ScopeError):
        Scope(None)  # not admin by omission
    with pytest.raises(ScopeError):
        Scope.admin("")


# -- the public surface ---------------------------------------------------------------------------
PUBLIC = (
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
    "Conflict",
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
    "NeedsAttention",
    "NextStep",
    "NotFound",
    "Outcome",
    "OutcomeUnknown",
    "PendingTurn",
    "PermanentError",
    "Problem",
    "RejectedInput",
    "Reconcile",
    "RecoveryReport",
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
    "TaskTooNew",
    "OtherBuild",
    "MigrationFailed",
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
)


def test_the_public_surface_is_pinned() -> None:
    import relaystate

    assert sorted(relaystate.__all__) == sorted(PUBLIC)
    assert all(hasattr(relaystate, name) for name in relaystate.__all__)
