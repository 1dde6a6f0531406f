"""The command line: inspect, resume and recover tasks in a store, and run the demo.

Every command takes ``--store URL`` (default ``RELAYSTATE_STORE``, else
``sqlite:///relaystate.db``) and ``--json`` for machine output. Bad input prints one line
``error: ...`` and exits with code 2; it never shows a traceback.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from .errors import RelaystateError
from .model import OPEN_TASK_STATUSES, Action, TaskState, TaskStatus
from .render import history_table, print_state, short
from .runtime import Runtime
from .store import Store, open_store
from .templates import TaskTemplate

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(
    help="relaystate: durable Sessions, Tasks and Actions that resume where they stopped.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tasks_app = typer.Typer(help="Inspect, resume and settle Tasks.", no_args_is_help=True)
demo_app = typer.Typer(help="The demo agents and their downstream ledger.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.add_typer(demo_app, name="demo")

out = Console()
err = Console(stderr=True)

DEFAULT_STORE = "sqlite:///relaystate.db"

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Store URL (memory://, sqlite:///path.db). Env: RELAYSTATE_STORE."
    ),
]
CacheOpt = Annotated[
    str | None,
    typer.Option(
        "--cache", help="Session cache URL (redis://host:port/db). Env: RELAYSTATE_CACHE."
    ),
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="The demo downstream ledger file. Env: RELAYSTATE_LEDGER; default beside the store.",
    ),
]
AppOpt = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="module:function returning your TaskTemplates (env RELAYSTATE_APP); "
        "default: the demo agents.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
UserOpt = Annotated[
    str | None, typer.Option("--user", help="Act as this user (scopes every read).")
]


def main() -> None:
    app()


def _fail(message: str) -> None:
    err.print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(2)


def friendly(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn expected errors into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (RelaystateError, ValueError, OSError) as exc:
            _fail(str(exc) or type(exc).__name__)
            raise AssertionError("unreachable") from exc

    return wrapper


def _store_url(store: str | None) -> str:
    return store or os.environ.get("RELAYSTATE_STORE") or DEFAULT_STORE


def ledger_path(store_url: str, ledger: str | None) -> Path:
    """The demo ledger: explicit, from the environment, or a file beside the SQLite store."""
    if ledger or os.environ.get("RELAYSTATE_LEDGER"):
        return Path(ledger or os.environ["RELAYSTATE_LEDGER"])
    if store_url.startswith("sqlite:///"):
        db = Path(store_url.removeprefix("sqlite:///").split("?")[0])
        return db.with_name(db.stem + "-ledger.db")
    return Path("relaystate-ledger.db")


def load_templates(app_ref: str | None, store_url: str, ledger: str | None) -> list[TaskTemplate]:
    ref = app_ref or os.environ.get("RELAYSTATE_APP")
    if not ref:
        from .demo import templates

        return templates(ledger_path(store_url, ledger))
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr or "templates")
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load templates from {ref!r}: {exc}") from None
    found = factory() if callable(factory) else factory
    return list(found) if isinstance(found, Iterable) else [found]


def _runtime(
    store: str | None,
    ledger: str | None = None,
    app_ref: str | None = None,
    cache: str | None = None,
) -> Runtime:
    url = _store_url(store)
    templates = load_templates(app_ref, url, ledger)
    return Runtime(open_store(url, cache=_cache_url(cache)), templates, build="cli")


def _cache_url(cache: str | None) -> str | None:
    return cache or os.environ.get("RELAYSTATE_CACHE") or None


def _emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def _state_json(state: TaskState) -> dict[str, Any]:
    return {**state.task.to_dict(), "actions": [_action_json(a) for a in state.actions]}


def _action_json(a: Action) -> dict[str, Any]:
    return {
        "id": a.id,
        "seq": a.seq,
        "name": a.name,
        "kind": str(a.kind),
        "stage": a.stage,
        "status": str(a.status),
        "idempotency_key": a.idempotency_key,
        "attempts": a.attempts,
        "error": a.error,
        "output": a.output,
    }


def _statuses(status: str | None) -> list[TaskStatus] | None:
    if status is None or status == "all":
        return None
    if status == "open":
        return list(OPEN_TASK_STATUSES)
    try:
        return [TaskStatus(s.strip()) for s in status.split(",")]
    except ValueError:
        known = ", ".join(["open", "all", *(s.value for s in TaskStatus)])
        raise ValueError(f"unknown status {status!r}; use one of: {known}") from None


@tasks_app.command("list")
@friendly
def tasks_list(
    user: Annotated[str, typer.Option("--user", help="Whose tasks.")],
    status: Annotated[
        str | None, typer.Option("--status", help="open, all, or statuses like done,failed.")
    ] = "open",
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List a user's Tasks (open ones by default), from any session or device."""
    store_obj = open_store(_store_url(store), cache=_cache_url(cache))
    tasks = store_obj.list_tasks(user, statuses=_statuses(status), limit=limit)
    if as_json:
        _emit_json([t.to_dict() for t in tasks])
        return
    table = Table("Task", "type", "stage", "status", "progress", "updated", "next")
    for t in tasks:
        table.add_row(
            t.id,
            t.type,
            t.stage,
            str(t.status),
            f"{t.progress.done}/{t.progress.total}",
            f"{t.updated_at:%Y-%m-%d %H:%M:%S}",
            t.status_text,
        )
    out.print(table if tasks else f"No {status or ''} tasks for {user}.")


@tasks_app.command("show")
@friendly
def tasks_show(
    task_id: str,
    user: UserOpt = None,
    at: Annotated[
        str | None, typer.Option("--at", help="Show it as it was at a version or ISO time.")
    ] = None,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a Task: stage, status, slots, progress and its Actions."""
    runtime = _runtime(store, ledger, app_ref, cache)
    state = runtime.task(task_id, user) if at is None else runtime.replay(task_id, _point(at), user)
    if as_json:
        _emit_json(_state_json(state))
    else:
        print_state(out, state, None if at is None else f"Task {task_id} at {at}")


def _point(at: str) -> int | Any:
    if at.isdigit():
        return int(at)
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise ValueError(f"--at takes a version number or an ISO time, not {at!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@tasks_app.command("history")
@friendly
def tasks_history(
    task_id: str,
    user: UserOpt = None,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The Task's journal as a timeline: what changed, why, by whom, when."""
    runtime = _runtime(store, ledger, app_ref, cache)
    baseline, entries = runtime.history(task_id, user)
    if as_json:
        _emit_json(
            {
                "baseline": None if baseline is None else baseline.to_dict(),
                "entries": [e.to_dict() for e in entries],
            }
        )
        return
    out.print(history_table(task_id, baseline, entries))


@tasks_app.command("resume")
@friendly
def tasks_resume(
    task_id: str,
    user: UserOpt = None,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Resume a Task from its stored state: reconcile, run what is due, say what's next."""
    runtime = _runtime(store, ledger, app_ref, cache)
    try:
        result = runtime.resume(task_id, user)
    finally:
        runtime.close()
    if as_json:
        _emit_json({**_state_json(result.state), "next_step": type(result.step).__name__})
    else:
        print_state(out, result.state)


@tasks_app.command("resolve")
@friendly
def tasks_resolve(
    task_id: str,
    seq: Annotated[int, typer.Argument(help="The Action's seq (see tasks show).")],
    succeeded: Annotated[
        bool,
        typer.Option("--succeeded/--failed", help="Did the Action take effect downstream?"),
    ],
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Settle an Action that needs attention, after checking the downstream by hand."""
    runtime = _runtime(store, ledger, app_ref, cache)
    state = runtime.resolve(task_id, seq, succeeded=succeeded, by="cli")
    if as_json:
        _emit_json(_state_json(state))
    else:
        print_state(out, state)


@app.command("recover")
@friendly
def recover(
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reconcile Actions whose lease expired (or whose process died) and continue their Tasks."""
    runtime = _runtime(store, ledger, app_ref, cache)
    try:
        if as_json:
            report = runtime.recover()
        else:
            with Progress(
                TextColumn("recovering"), BarColumn(), MofNCompleteColumn(), console=err
            ) as bar:
                job = bar.add_task("recover", total=None)
                report = runtime.recover(on_task=lambda _t, _o: bar.advance(job))
    finally:
        runtime.close()
    data = {
        "examined_actions": report.examined,
        "live_leases_skipped": report.skipped,
        "claimed_by_another_recoverer": report.claimed_elsewhere,
        "resumed": report.outcomes,
        "errors": report.errors,
    }
    if as_json:
        _emit_json(data)
        return
    out.print(
        f"Examined {report.examined} open Actions ({report.skipped} under a live lease, "
        f"{report.claimed_elsewhere} Tasks taken by another recoverer); "
        f"resumed {len(report.resumed)} Tasks, {len(report.errors)} errors."
    )
    for task_id, outcome in report.outcomes.items():
        out.print(f"  {task_id}: {outcome}")
    for task_id, message in report.errors.items():
        out.print(f"  {task_id}: error {message}", style="red")


@app.command("compact")
@friendly
def compact(
    retention_days: Annotated[float, typer.Option(min=0)] = 7.0,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fold journal entries older than the retention into baselines (replay still works)."""
    from datetime import timedelta

    runtime = _runtime(store, ledger, app_ref, cache)
    folded = runtime.compact(retention=timedelta(days=retention_days))
    if as_json:
        _emit_json({"folded_entries": folded})
    else:
        out.print(f"Folded {folded} journal entries into baselines.")


LangOpt = Annotated[
    str | None,
    typer.Option("--lang", help="Reply in zh or en (default: the language the user writes)."),
]


def _conversation(
    store: str | None, cache: str | None, ledger: str | None, app_ref: str | None
) -> Any:
    from .conversation import Conversation
    from .llm import default_model

    return Conversation(_runtime(store, ledger, app_ref, cache), default_model())


def _check_lang(lang: str | None) -> None:
    if lang is not None and lang not in ("zh", "en"):
        raise ValueError(f"--lang takes zh or en, not {lang!r}")


@app.command("say")
@friendly
def say(
    text: Annotated[str, typer.Argument(help="What the user says.")],
    user: Annotated[str, typer.Option("--user", help="Who is talking.")],
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="Aim the turn at this Task explicitly.")
    ] = None,
    lang: LangOpt = None,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One conversational turn in one process (for scripts): prints the reply or the Turn."""
    _check_lang(lang)
    conversation = _conversation(store, cache, ledger, app_ref)
    try:
        turn = conversation.handle(user, text, session, language=lang, task_id=task)
    finally:
        conversation.runtime.close()
    if as_json:
        _emit_json(turn.to_dict())
    else:
        out.print(turn.reply, markup=False, highlight=False)


@app.command("chat")
@friendly
def chat(
    user: Annotated[str, typer.Option("--user", help="Who is talking.")],
    session: Annotated[str | None, typer.Option("--session", help="Session id.")] = None,
    lang: LangOpt = None,
    store: StoreOpt = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    app_ref: AppOpt = None,
) -> None:
    """Talk with the demo agents; Ctrl-C any time, a new chat continues where you were."""
    from .render import turn_panel

    _check_lang(lang)
    conversation = _conversation(store, cache, ledger, app_ref)
    out.print("[dim]relaystate chat: Ctrl-C or Ctrl-D to leave; your tasks stay.[/]")
    try:
        while True:
            try:
                text = out.input("[bold]you>[/] ")
            except EOFError:
                break
            if not text.strip():
                continue
            turn = conversation.handle(user, text, session, language=lang)
            session = turn.session_id
            out.print(turn_panel(turn))
    except KeyboardInterrupt:
        out.print("\n[dim]bye: say “continue” next time.[/]")
    finally:
        conversation.runtime.close()


@demo_app.command("run")
@friendly
def demo_run(
    workdir: Annotated[
        Path, typer.Option("--dir", help="Where the demo keeps its store and ledger.")
    ] = Path("demo-data"),
) -> None:
    """A scripted walk-through: leave mid-task, come back on a new device, survive a crash."""
    from .demo.script import run_demo

    run_demo(workdir, out)


@demo_app.command("ledger")
@friendly
def demo_ledger(
    store: StoreOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What the demo downstream holds: each effect with its key and how many requests came."""
    from .demo.ledger import Ledger

    path = ledger_path(_store_url(store), ledger)
    if not path.exists():
        raise ValueError(f"no ledger at {path}")
    entries = Ledger(path).entries()
    if as_json:
        _emit_json(entries)
        return
    table = Table("idempotency key", "kind", "requests", "effects", "effect")
    for e in entries:
        table.add_row(
            e["idempotency_key"],
            e["kind"],
            str(e["requests"]),
            str(e["effects"]),
            short(e["effect"]),
        )
    out.print(table)


# -- db: the database schema --------------------------------------------------------------
db_app = typer.Typer(
    help="The store's database schema: its version and upgrades.", no_args_is_help=True
)
app.add_typer(db_app, name="db")


def _schema_store(store: str | None) -> tuple[str, Store]:
    """The store, opened without upgrading its schema (these commands do that themselves)."""
    url = _store_url(store)
    return url, open_store(url, migrate=False)


def _no_schema(url: str) -> ValueError:
    return ValueError(f"{url} keeps no database schema: nothing to migrate")


@db_app.command("status")
@friendly
def db_status(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """The schema version of the store's database, the latest one, and the steps between."""
    url, store_obj = _schema_store(store)
    try:
        status = store_obj.schema_status()
    finally:
        store_obj.close()
    if status is None:
        raise _no_schema(url)
    if as_json:
        _emit_json(status.to_dict())
        return
    if status.too_new:
        out.print(
            f"Schema version {status.current} is newer than this relaystate knows "
            f"({status.latest}): upgrade relaystate before using this database.",
            style="red",
        )
    elif status.up_to_date:
        out.print(f"Schema version {status.current}: up to date.")
    else:
        out.print(f"Schema version {status.current} of {status.latest}; pending:")
        for step in status.pending:
            out.print(f"  {step.label}")
        out.print("Run `relaystate db upgrade` (or open the store) to apply them.")


@db_app.command("upgrade")
@friendly
def db_upgrade(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Apply pending schema migrations, in order, each in its own transaction."""
    url, store_obj = _schema_store(store)
    try:
        before = store_obj.schema_status()
        applied = store_obj.upgrade_schema()
        after = store_obj.schema_status()
    finally:
        store_obj.close()
    if before is None or after is None:
        raise _no_schema(url)
    if as_json:
        _emit_json(
            {
                "backend": after.backend,
                "from": before.current,
                "to": after.current,
                "latest": after.latest,
                "applied": [s.to_dict() for s in applied],
            }
        )
        return
    for step in applied:
        out.print(f"Applied {step.label}.")
    if applied:
        out.print(f"Schema upgraded from version {before.current} to {after.current}.")
    else:
        out.print(f"Schema version {after.current}: already up to date.")


if __name__ == "__main__":  # pragma: no cover
    main()
