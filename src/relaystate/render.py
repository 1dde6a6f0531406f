"""Terminal rendering shared by the CLI and the demo: Tasks, Actions and journal timelines."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .model import JournalEntry, Snapshot, Task, TaskState

SHORT_ID = 8
"""How many characters of an id are shown (the CLI takes them back as a prefix)."""


def print_state(out: Console, state: TaskState, title: str | None = None) -> None:
    """A Task's stage, status, slots and progress, then its Actions."""
    task = state.task
    table = Table(title=title or f"Task {task.id}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("type", task.type)
    table.add_row("user", task.user_id)
    table.add_row("stage", task.stage)
    table.add_row("status", str(task.status))
    table.add_row("slots", json.dumps(task.slots, ensure_ascii=False))
    table.add_row("missing", ", ".join(task.missing_slots) or "-")
    table.add_row("progress", f"{task.progress.done}/{task.progress.total} actions")
    table.add_row("version", str(task.version))
    pin = f", pinned to build {task.created_by_build}" if task.pinned else ""
    table.add_row(
        "template",
        f"{task.type} version {task.template_version} (started by build "
        f"{task.created_by_build or '?'}{pin})",
    )
    if task.due_at is not None:
        table.add_row("work due", f"{task.due_at:%Y-%m-%d %H:%M:%S} UTC")
    table.add_row("next", task.status_text)
    out.print(table)
    if state.actions:
        actions = Table("seq", "Action", "status", "attempts", "idempotency key", "error")
        for a in state.actions:
            actions.add_row(
                str(a.seq), a.name, str(a.status), str(a.attempts), a.idempotency_key, a.error or ""
            )
        out.print(actions)


def task_lines(tasks: Sequence[Task], *, owners: bool, width: int = 80) -> Text:
    """Tasks one line each (short id, owner when ``owners``, type, status, progress, when),
    with where each stands wrapped beneath it: readable at 80 columns, ids never cut."""
    columns = ["Task", *(["user"] if owners else []), "type", "status", "done", "updated (UTC)"]
    rows = [
        [
            t.id[:SHORT_ID],
            *([t.user_id] if owners else []),
            t.type,
            str(t.status),
            f"{t.progress.done}/{t.progress.total}",
            f"{t.updated_at:%Y-%m-%d %H:%M}",
        ]
        for t in tasks
    ]
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    out = Text()
    out.append("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    out.append("\n", style="bold")
    out.stylize("bold", 0, len(out))
    indent = " " * (SHORT_ID + 2)
    for task, row in zip(tasks, rows, strict=True):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
        for line in textwrap.wrap(task.status_text, max(width - len(indent), 20)):
            out.append(indent + line + "\n", style="dim")
    out.rstrip()
    return out


def history_table(
    task_id: str,
    baseline: Snapshot | None,
    entries: list[JournalEntry],
    said: Sequence[Sequence[str]] | None = None,
) -> Table:
    """The journal as a timeline: version, when, by whom, why, and what changed in people's
    words (``said``, one list per entry; else the changed fields, bookkeeping left out)."""
    first = baseline.at if baseline is not None else entries[0].at if entries else None
    since = f" since {first:%Y-%m-%d}" if first is not None else ""
    table = Table(title=f"History of {task_id}{since} (UTC)")
    for column in ("v", "when", "by"):
        table.add_column(column, no_wrap=True)
    table.add_column("why", ratio=2, overflow="fold")
    table.add_column("what changed", ratio=3, overflow="fold")
    if baseline is not None:
        table.add_row(str(baseline.version), f"{baseline.at:%H:%M:%S}", "-", "baseline", "")
    for i, e in enumerate(entries):
        when = (
            f"{e.at:%H:%M:%S.%f}"[:-3]
            if first is None or e.at.date() == first.date()
            else f"{e.at:%m-%d %H:%M}"
        )
        what = "\n".join(said[i]) if said is not None else summary(e)
        table.add_row(str(e.version), when, actor_label(e.actor), e.reason.splitlines()[0], what)
    return table


def actor_label(actor: str) -> str:
    """``worker:host/pid/start/nonce`` reads as ``worker 1234``; users stay as they are."""
    kind, _, who = actor.partition(":")
    parts = who.split("/")
    if kind == "worker" and len(parts) == 4 and parts[1].isdigit():
        return f"worker {parts[1]}"
    return actor


def summary(entry: JournalEntry) -> str:
    parts = []
    for change in entry.changes:
        path = change["path"]
        if path[:1] == ["task"] and len(path) == 1:
            parts.append("created")
            continue
        if path[:1] == ["actions"] and len(path) <= 2:
            if len(path) == 2:
                parts.append(f"action {path[1]} recorded")
            continue
        if path[-1] in ("status_text", "updated_at", "lease_expires_at", "lease_owner"):
            continue
        name = ".".join(str(p) for p in path[1:])
        if path[0] == "actions":
            name = f"action {name}"
        after = change.get("after", "∅")
        if "before" in change:
            parts.append(f"{name}: {short(change['before'])} → {short(after)}")
        else:
            parts.append(f"{name} = {short(after)}")
    return "; ".join(parts)


def short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


SIDE_BY_SIDE = 100
"""The terminal width from which ``turn_panel`` puts the reply beside the Task's state."""


def turn_panel(turn: Any, width: int | None = None) -> Any:
    """The reply beside the task's stage, slots and progress (for ``relaystate chat``); the
    two stacked on a narrow terminal (under ``SIDE_BY_SIDE`` columns). The reply wraps by
    character where it has no spaces (Chinese), so none of it is cut off at any width."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    text = Text(turn.reply, overflow="fold")
    reply = Panel(text, title="relaystate", title_align="left", border_style="cyan")
    if turn.state is None:
        return reply
    task = turn.state.task
    facts = Table(show_header=False, box=None)
    facts.add_column(overflow="fold")
    facts.add_column(overflow="fold")
    facts.add_row("task", f"{task.type} {task.id[:8]}")
    facts.add_row("stage", f"{task.stage} ({task.status})")
    for name, value in task.slots.items():
        facts.add_row(name, short(value))
    if task.missing_slots:
        facts.add_row("missing", ", ".join(task.missing_slots))
    facts.add_row("progress", f"{task.progress.done}/{task.progress.total} actions")
    state = Panel(facts, border_style="dim")
    if width is not None and width < SIDE_BY_SIDE:
        return Group(reply, state)
    grid = Table.grid(expand=True)
    grid.add_column(ratio=3)
    grid.add_column(ratio=2)
    grid.add_row(reply, state)
    return grid
