"""Does the cost of one conversational turn stay flat as a task's history grows?

Run: ``python bench/turns.py`` (full: histories of 10, 1,000 and 10,000 journal entries),
``python bench/turns.py --quick`` (10 and 1,000, smaller windows) and ``--json PATH`` to
keep the numbers. This is a benchmark, not a test: it asserts nothing about speed.

A *turn* is what an agent does once per user message: ``Runtime.fill`` of one free-text
slot with the user's line and the assistant's reply as session messages, ``run=True``. The
task's template has a second required slot that is never filled, so the task stays in
``collecting`` forever and every turn appends exactly one journal entry.

Side by side, in one run and in one directory:

* raw SQLite: one ~300-byte row appended per transaction (WAL, the same ``synchronous``),
  the floor any durable store on this disk pays per commit;
* relaystate on SQLite with ``synchronous=FULL`` (the default) and ``NORMAL``;
* relaystate on ``memory://``, the pure-Python cost of a turn with no I/O at all.
"""

from __future__ import annotations

import gc
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchlib import (
    RAW_WARMUP,
    RawAppend,
    RawLog,
    facts_line,
    files_size,
    grow,
    history_options,
    history_sizes,
    interleave,
    machine_facts,
    make_console,
    pct,
    timed,
    write_json,
)
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, Slot, Stage, TaskTemplate, all_required_slots, open_store

USER = "bench-user"
SCOPE = Scope.user(USER)
SESSION = "bench-session"
TARGET_RATIO = 2.0
INTERLEAVE = 20
"""Turns per block; each block follows as many raw appends timed on the same disk."""
WARMUP_TURNS = 250
"""Turns on a separate task before timing (~9 WAL frames each): WAL past its first checkpoint."""


# -- the task under test --------------------------------------------------------------------
def chat_template() -> TaskTemplate:
    """A task that accepts turns forever: ``note`` is optional, ``never`` is never given."""
    return TaskTemplate(
        "endless_chat",
        goal="Keep talking",
        slots=[
            Slot("note", required=False),
            Slot("never", ask={"en": "This question is never answered."}),
        ],
        stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
    )


def turn_payload(i: int) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Slot value and messages of turn ``i``: realistic sizes, different every turn."""
    note = f"turn {i}: the user would like a window seat and an early departure"
    user = f"[{i}] Could you make it an early flight, ideally before nine, with a window seat?"
    reply = (
        f"[{i}] Noted: early departure before 09:00 and a window seat. I still need one more "
        "detail before I can look for flights; which airport would you like to leave from, "
        "and are your dates flexible by a day or two?"
    )
    return {"note": note}, [("user", user), ("assistant", reply)]


# -- measuring ---------------------------------------------------------------------------
@dataclass
class Window:
    """Numbers for one history length of one store (times in microseconds)."""

    store: str
    history: int
    turns: int
    turn_p50_us: float
    turn_p95_us: float
    turn_mean_us: float
    resume_p50_us: float
    resume_p95_us: float
    task_p50_us: float
    task_p95_us: float
    raw_p50_us: float
    raw_synchronous: str
    logical_bytes_per_turn: float | None = None
    logical_breakdown: dict[str, float] = field(default_factory=dict)
    file_growth_bytes_per_turn: float | None = None
    page_growth_bytes_per_turn: float | None = None
    write_syscall_bytes_per_turn: float | None = None
    write_syscalls_per_turn: float | None = None
    ratio_to_raw: float | None = None
    excess_over_raw_us: float | None = None


class Subject:
    """One store with one endless task, grown turn by turn."""

    def __init__(self, name: str, url: str, db_path: Path | None, synchronous: str | None) -> None:
        self.name, self.url, self.db_path, self.synchronous = name, url, db_path, synchronous
        self.runtime = Runtime(open_store(url), [chat_template()])
        self.turns = 0
        slots, messages = turn_payload(0)
        state = self.runtime.start(
            SCOPE, "endless_chat", session_id=SESSION, slots=slots, messages=messages
        )
        self.task_id = state.task.id
        assert state.task.stage == "collecting" and state.task.version == 1

    def warm_up(self, turns: int) -> None:
        """Bring the store to a steady state (WAL at its high-water mark, statements cached)
        with turns on another task, so the task under test keeps its exact history."""
        other = self.runtime.start(SCOPE, "endless_chat", session_id=f"{SESSION}-warm-up")
        for i in range(turns):
            slots, messages = turn_payload(-i)
            self.runtime.fill(
                SCOPE, other.task.id, slots, session_id=f"{SESSION}-warm-up", messages=messages
            )

    def turn(self) -> None:
        self.turns += 1
        slots, messages = turn_payload(self.turns)
        self.runtime.fill(SCOPE, self.task_id, slots, session_id=SESSION, messages=messages)

    def history(self) -> int:
        """Journal entries of the task (one per committed version)."""
        return self.runtime.task(SCOPE, self.task_id).task.version

    def reader(self) -> sqlite3.Connection:
        assert self.db_path is not None
        return sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)

    def snapshot(self) -> dict[str, Any]:
        """Row ids and sizes to compute what a window of turns wrote (SQLite only)."""
        if self.db_path is None:
            return {}
        with self.reader() as db:
            (version,) = db.execute(
                "SELECT version FROM tasks WHERE id = ?", (self.task_id,)
            ).fetchone()
            (message_id,) = db.execute(
                "SELECT coalesce(max(id), 0) FROM messages WHERE session_id = ?", (SESSION,)
            ).fetchone()
            session_row = db.execute(
                "SELECT data FROM sessions WHERE id = ?", (SESSION,)
            ).fetchone()
            (pages,) = db.execute("PRAGMA page_count").fetchone()
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            (page_size,) = db.execute("PRAGMA page_size").fetchone()
        return {
            "version": version,
            "message_id": message_id,
            "session_data": session_row[0] if session_row else "",
            "used_bytes": (pages - free) * page_size,
            "files": files_size(self.db_path),
        }

    def logical(
        self, before: dict[str, Any], after: dict[str, Any], turns: int
    ) -> dict[str, float]:
        """Average bytes of the rows each turn inserted or rewrote (values, not b-tree pages)."""
        with self.reader() as db:
            (journal,) = db.execute(
                "SELECT sum(length(CAST(data AS BLOB)) + length(CAST(task_id AS BLOB))"
                " + length(CAST(at AS BLOB)) + 8) FROM journal"
                " WHERE task_id = ? AND version > ? AND version <= ?",
                (self.task_id, before["version"], after["version"]),
            ).fetchone()
            (messages,) = db.execute(
                "SELECT sum(length(CAST(text AS BLOB)) + length(CAST(session_id AS BLOB))"
                " + length(CAST(user_id AS BLOB)) + length(CAST(role AS BLOB))"
                " + length(CAST(task_id AS BLOB)) + length(CAST(created_at AS BLOB)) + 8)"
                " FROM messages WHERE session_id = ? AND id > ? AND id <= ?",
                (SESSION, before["message_id"], after["message_id"]),
            ).fetchone()
            (session,) = db.execute(
                "SELECT length(CAST(data AS BLOB)) + length(CAST(id AS BLOB))"
                " + length(CAST(user_id AS BLOB)) FROM sessions WHERE id = ?",
                (SESSION,),
            ).fetchone()
            (task_row,) = db.execute(
                "SELECT length(CAST(data AS BLOB)) + length(CAST(id AS BLOB))"
                " + length(CAST(user_id AS BLOB)) + length(CAST(type AS BLOB))"
                " + length(CAST(status AS BLOB)) + length(CAST(updated_at AS BLOB)) + 8"
                " FROM tasks WHERE id = ?",
                (self.task_id,),
            ).fetchone()
        return {
            "task_row": float(task_row),
            "journal_entry": journal / turns,
            "messages": messages / turns,
            # The session row is rewritten only when a task joins it or a minute has passed.
            "session_row": float(session)
            if after["session_data"] != before["session_data"]
            else 0.0,
        }

    def statements_per_turn(self) -> dict[str, Any] | None:
        """SQL statements one (untimed) turn sends, by kind, via the connection's trace hook."""
        db = getattr(self.runtime.stores.tasks, "_db", None)
        if not isinstance(db, sqlite3.Connection):
            return None
        seen: list[str] = []
        db.set_trace_callback(seen.append)
        try:
            self.turn()
        finally:
            db.set_trace_callback(None)
        kinds: dict[str, int] = {}
        for sql in seen:
            word = sql.split()[0].upper()
            kinds[word] = kinds.get(word, 0) + 1
        # BEGIN IMMEDIATE opens a write transaction; a plain BEGIN, a read snapshot.
        writes = sum(1 for sql in seen if sql.upper().startswith("BEGIN IMMEDIATE"))
        return {"total": len(seen), "by_kind": kinds, "transactions": writes}

    def close(self) -> None:
        self.runtime.close()


def measure(subject: Subject, raw: RawLog, window: int, reads: int) -> Window:
    """Time ``window`` turns in blocks, each after as many raw appends (so both see the disk
    as it is at that moment), then ``reads`` resumes and loads; nothing printed meanwhile."""
    history = subject.history()
    before = subject.snapshot()
    raws, turns = interleave(window, INTERLEAVE, raw.append, subject.turn)
    after = subject.snapshot()
    version = subject.history()
    assert version == history + window, "every turn must add exactly one journal entry"
    resumes = timed(lambda: subject.runtime.resume(SCOPE, subject.task_id), reads)
    loads = timed(lambda: subject.runtime.task(SCOPE, subject.task_id), reads)
    assert subject.history() == version, "resume and task() must not write"
    w = Window(
        store=subject.name,
        history=history,
        turns=window,
        turn_p50_us=statistics.median(turns.samples_ns) / 1e3,
        turn_p95_us=pct(turns.samples_ns, 0.95) / 1e3,
        turn_mean_us=statistics.fmean(turns.samples_ns) / 1e3,
        resume_p50_us=statistics.median(resumes) / 1e3,
        resume_p95_us=pct(resumes, 0.95) / 1e3,
        task_p50_us=statistics.median(loads) / 1e3,
        task_p95_us=pct(loads, 0.95) / 1e3,
        raw_p50_us=statistics.median(raws.samples_ns) / 1e3,
        raw_synchronous=raw.synchronous,
    )
    w.ratio_to_raw = w.turn_p50_us / w.raw_p50_us
    w.excess_over_raw_us = w.turn_p50_us - w.raw_p50_us
    if subject.db_path is not None:
        w.logical_breakdown = subject.logical(before, after, window)
        w.logical_bytes_per_turn = sum(w.logical_breakdown.values())
        w.file_growth_bytes_per_turn = (after["files"] - before["files"]) / window
        w.page_growth_bytes_per_turn = (after["used_bytes"] - before["used_bytes"]) / window
        if turns.wchar is not None and turns.syscw is not None:
            w.write_syscall_bytes_per_turn = turns.wchar / window
            w.write_syscalls_per_turn = turns.syscw / window
    return w


# -- reporting ---------------------------------------------------------------------------
def us(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def nbytes(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def ratio_cell(value: float | None) -> str:
    if value is None:
        return "—"
    colour = "green" if value <= TARGET_RATIO else "red"
    return f"[{colour}]{value:.2f}×[/{colour}]"


def render(console: Console, raws: list[tuple[str, RawAppend]], windows: list[Window]) -> None:
    table = Table(title="Per-turn cost as a task's history grows", title_justify="left")
    table.add_column("store", no_wrap=True)
    table.add_column("history\n(entries)", justify="right")
    table.add_column("turn p50\nµs", justify="right")
    table.add_column("turn p95\nµs", justify="right")
    table.add_column("raw append\np50 µs ¹", justify="right")
    table.add_column("turn ÷ raw\n(p50)", justify="right")
    table.add_column("logical\nB/turn ²", justify="right")
    table.add_column("DB pages\nB/turn ³", justify="right")
    table.add_column("db+wal files\nB/turn ⁴", justify="right")
    table.add_column("written\nB/turn ⁵", justify="right")
    table.add_column("resume p50\nµs", justify="right")
    table.add_column("task() p50\nµs", justify="right")
    for label, raw in raws:
        table.add_row(
            label,
            "—",
            us(raw.p50_us),
            us(raw.p95_us),
            "—",
            "—",
            "≈300",
            nbytes(raw.page_growth_bytes_per_append),
            nbytes(raw.file_growth_bytes_per_append),
            nbytes(raw.write_syscall_bytes_per_append),
            "—",
            "—",
        )
    table.add_section()
    last = None
    for w in windows:
        if last is not None and w.store != last:
            table.add_section()
        last = w.store
        table.add_row(
            w.store,
            f"{w.history:,}",
            us(w.turn_p50_us),
            us(w.turn_p95_us),
            us(w.raw_p50_us),
            ratio_cell(w.ratio_to_raw),
            nbytes(w.logical_bytes_per_turn),
            nbytes(w.page_growth_bytes_per_turn),
            nbytes(w.file_growth_bytes_per_turn),
            nbytes(w.write_syscall_bytes_per_turn),
            us(w.resume_p50_us),
            us(w.task_p50_us),
        )
    console.print(table)


def flatness(windows: list[Window]) -> list[str]:
    """One line per store: how p50s moved from the shortest to the longest history."""
    lines = []
    for store in dict.fromkeys(w.store for w in windows):
        rows = [w for w in windows if w.store == store]
        first, final = rows[0], rows[-1]
        ratios = [w.ratio_to_raw for w in rows if w.ratio_to_raw is not None]
        line = (
            f"{store}: {first.history:,} → {final.history:,} entries: turn p50 "
            f"{first.turn_p50_us:,.0f} → {final.turn_p50_us:,.0f} µs "
            f"({final.turn_p50_us / first.turn_p50_us:.2f}×), resume p50 "
            f"{final.resume_p50_us / first.resume_p50_us:.2f}×, task() p50 "
            f"{final.task_p50_us / first.task_p50_us:.2f}×"
        )
        if first.write_syscall_bytes_per_turn and final.write_syscall_bytes_per_turn:
            line += (
                f", written/turn "
                f"{final.write_syscall_bytes_per_turn / first.write_syscall_bytes_per_turn:.2f}×"
            )
        line += f"; turn ÷ raw {min(ratios):.2f}–{max(ratios):.2f}×"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = history_options(__doc__)
    parser.add_argument("--reads", type=int, help="timed resume() and task() calls per length")
    parser.add_argument("--no-normal", action="store_true", help="skip synchronous=NORMAL")
    args = parser.parse_args(argv)

    sizes = history_sizes(args)
    window = args.window or (50 if args.quick else 200)
    reads = args.reads or (20 if args.quick else 50)
    raw_n = 300 if args.quick else 2_000

    console = make_console(160)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-bench-", dir=args.dir))
    facts = {
        **machine_facts(),
        "directory": str(workdir),
        "sizes": sizes,
        "window_turns": window,
        "read_calls": reads,
        "raw_appends": raw_n,
    }
    console.print(facts_line(facts))
    console.print(
        f"databases in {workdir}; history lengths {', '.join(f'{s:,}' for s in sizes)}; "
        f"{window} timed turns and {reads} resume()/task() calls per length"
    )

    modes = ["FULL"] if args.no_normal else ["FULL", "NORMAL"]
    windows: list[Window] = []
    statements: dict[str, Any] = {}
    raws: list[tuple[str, RawAppend]] = []
    logs: dict[str, RawLog] = {}
    try:
        for m in modes:
            logs[m] = RawLog(workdir / f"raw-{m.lower()}.db", m)
            raws.append((f"raw append {m} (start)", logs[m].measure(raw_n)))
        subjects = [
            Subject(
                f"SQLite {m}",
                f"sqlite:///{workdir / f'turns-{m.lower()}.db'}?synchronous={m.lower()}",
                workdir / f"turns-{m.lower()}.db",
                m,
            )
            for m in modes
        ]
        subjects.append(Subject("memory://", "memory://", None, None))
        for subject in subjects:
            subject.warm_up(WARMUP_TURNS)
            for size in sizes:
                grow(subject, size, console)
                gc.collect()
                windows.append(measure(subject, logs[subject.synchronous or "FULL"], window, reads))
            statements[subject.name] = subject.statements_per_turn()
            subject.close()
        for m in modes:
            raws.append((f"raw append {m} (end)", logs[m].measure(raw_n)))
    finally:
        for log in logs.values():
            log.close()
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    render(console, raws, windows)
    console.print(
        "¹ raw append: one ~300-byte row per transaction into its own WAL file in the same "
        "directory, same synchronous setting. Raw rows: a run of appends at the start and at "
        "the end. Store rows: appends interleaved with the timed turns (blocks of "
        f"{INTERLEAVE} + {INTERLEAVE}), so the ratio compares both on the disk as it was at "
        f"that moment; memory:// is set against FULL. Target: turn ≤ {TARGET_RATIO:g}× raw.\n"
        "² logical: bytes of the values a turn wrote: the rewritten task row and session row, "
        "plus the new journal entry and 2 messages (JSON/text + key columns); no b-tree "
        "overhead.\n"
        "³ DB pages: growth of the database's used pages (page_count - freelist_count, read "
        "through the WAL) ÷ turns: the space a turn adds for good, b-trees and indexes "
        "included.\n"
        "⁴ db+wal files: (database file + WAL file size) after the window minus before, ÷ "
        "turns. Lumpy: the WAL is reused after each checkpoint and never shrinks, and the "
        "database file grows only when a checkpoint copies pages into it.\n"
        "⁵ written: bytes this process passed to write() (/proc/self/io wchar) during the "
        "timed turns ÷ turns: WAL frames (page + 24-byte header each) and, amortised, the "
        "checkpoints copying pages back into the database.\n"
        "History: journal entries of the task when the window started (each timed turn adds "
        f"one). Before timing, each raw file gets {RAW_WARMUP:,} appends and each store "
        f"{WARMUP_TURNS} turns on another task, so no window pays for first growing the WAL."
    )
    for line in flatness(windows):
        console.print(line)
    sql = statements.get(f"SQLite {modes[0]}")
    if sql:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(sql["by_kind"].items()))
        console.print(
            f"SQL per turn (SQLite): {sql['total']} statements ({kinds}), "
            f"{sql['transactions']} write transaction(s)"
        )
    console.print(f"ran in {elapsed:.1f} s")
    results = {
        "raw_append": {label: asdict(r) for label, r in raws},
        "windows": [asdict(w) for w in windows],
        "sql_per_turn": statements,
        "target_ratio": TARGET_RATIO,
    }
    write_json(console, args.json, facts, results, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
