"""Does a full conversational turn cost about one durable write, on every store, as history grows?

Run: ``python bench/conversation.py`` (histories of 10, 1,000 and 10,000 journal entries),
``--quick`` (10 and 1,000, smaller windows) and ``--json PATH`` to keep the numbers. A
benchmark, not a test: it asserts nothing about speed, only that every turn reached the task
under test and added exactly one journal entry to it.

A *turn* is ``Conversation(runtime).handle(scope, text, session_id)``, the whole engine: the
runtime reads the session and its open tasks (``begin_turn``), the engine routes ~500 bytes of
answer to the survey waiting in that session and extracts its free-text slot, and the runtime
commits the fill with the user's words and the reply (issue 7: one write transaction when no
action runs). The *raw append* is the durable write that turn should approach: one ~500-byte
row per transaction into its own SQLite WAL database with the same ``synchronous``, timed in
blocks interleaved with the turns so that both see the disk at the same moment.

Stores: SQLite ``synchronous=FULL`` and ``NORMAL``, ``memory://``, PostgreSQL, and PostgreSQL
with the Redis session cache (throwaway servers from ``tests/services.py``; where they cannot
run, their rows are skipped and the reason printed). Then ``relaystate say`` in a fresh process
and the import of ``relaystate.cli``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchlib import (
    HERE,
    RawLog,
    facts_line,
    find_server_pids,
    grow,
    history_options,
    history_sizes,
    interleave,
    machine_facts,
    make_console,
    pct,
    pg_create,
    redis_flush,
    server_cpu_s,
    sql_kind,
    start_services,
    write_json,
)
from rich.console import Console
from rich.table import Table
from survey_app import ANSWER_BYTES, QUESTION, START, answer, templates

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation

SCOPE = Scope.user("bench")
SESSION = "s1"
WARM_SESSION = "warm-up"
INTERLEAVE = 20
"""Turns per block; each block follows as many raw appends timed on the same disk."""
WARMUP_TURNS = 250
"""Turns in another session before timing: WAL past its first checkpoint, statements cached,
psycopg's statements prepared on the pooled connection."""
FRESH_RUNS = 15
"""Fresh processes per row of the start-up table."""

# Issue 7's targets.
P50_RATIO = {"FULL": 1.2, "NORMAL": 5.0}
"""Turn p50 ÷ raw append p50, SQLite at that synchronous."""
FSYNCS_PER_TURN = 1.1
"""One fsync a turn, plus the checkpoints' share (the raw append pays those too)."""
CPU_RATIO = 2.0
BYTES_RATIO = 3.0
SAY_P50_MS = 150.0
IMPORT_P50_MS = 60.0
FLAT = 0.15
"""Turn p50 at the longest history within this of the shortest."""
TARGETS = {
    "p50_ratio": P50_RATIO,
    "fsyncs_per_turn": FSYNCS_PER_TURN,
    "cpu_ratio": CPU_RATIO,
    "bytes_ratio": BYTES_RATIO,
    "say_p50_ms": SAY_P50_MS,
    "import_p50_ms": IMPORT_P50_MS,
    "flat": FLAT,
}

TASK_READS = ("load", "load_many", "list_tasks")
SESSION_READS = ("get_session", "messages")
TASK_METHODS = ("read_turn", "commit", *TASK_READS)
SESSION_METHODS = ("write", "committed", *SESSION_READS)


# -- the stores -------------------------------------------------------------------------------
@dataclass
class Spec:
    """One row group: a store and the raw append it is set against."""

    name: str
    url: str
    cache: str | None = None
    synchronous: str = "FULL"
    """Of the raw append (and of the store, for SQLite)."""
    postgres: bool = False
    server_pids: list[int] = field(default_factory=list)

    @property
    def sqlite(self) -> bool:
        return self.url.startswith("sqlite:")


class Subject:
    """One store with the survey under test in session ``s1``, grown turn by turn."""

    def __init__(self, spec: Spec) -> None:
        self.spec, self.name = spec, spec.name
        self.runtime = Runtime(open_store(spec.url, cache=spec.cache), templates())
        self.conv = Conversation(self.runtime)
        first = self.conv.handle(SCOPE, START, SESSION)
        assert first.state is not None and first.reply == QUESTION, first.reply
        self.task_id = first.state.task.id
        self.said = 0

    def warm_up(self, turns: int) -> None:
        """Turns on a survey in another session, so the task under test keeps its history."""
        self.conv.handle(SCOPE, START, WARM_SESSION)
        for i in range(1, turns + 1):
            self.conv.handle(SCOPE, answer(-i), WARM_SESSION)

    def turn(self) -> None:
        self.said += 1
        done = self.conv.handle(SCOPE, answer(self.said), SESSION)
        if done.state is None or done.state.task.id != self.task_id:
            raise AssertionError(f"{self.name}: a turn missed the survey ({done.reply!r})")

    def history(self) -> int:
        """Journal entries of the task under test (one per committed version)."""
        return self.runtime.task(SCOPE, self.task_id).task.version

    def check_last(self) -> None:
        """The last answer is the slot's value, whole."""
        slots = self.runtime.task(SCOPE, self.task_id).task.slots
        assert slots.get("answer") == answer(self.said), "the slot holds the last answer"

    def close(self) -> None:
        self.runtime.close()


class PgInsert:
    """PostgreSQL's own floor: one ~500-byte row INSERTed per transaction (autocommit), in
    its own database on the same server (for comparison only; the targets use SQLite's)."""

    def __init__(self, server: str) -> None:
        import psycopg

        self.conn = psycopg.connect(pg_create(server, "raw_append"), autocommit=True)
        self.conn.execute(
            "CREATE TABLE log (id bigserial PRIMARY KEY, at text NOT NULL, data text NOT NULL)"
        )
        self.body, self.n = "x" * (ANSWER_BYTES - 20), 0
        for _ in range(200):  # the statement prepared, the table's first pages there
            self.append()

    def append(self) -> None:
        self.n += 1
        self.conn.execute(
            "INSERT INTO log (at, data) VALUES (%s, %s)", (f"{self.n:020d}", self.body)
        )

    def close(self) -> None:
        self.conn.close()


# -- counting what a turn does ----------------------------------------------------------------
def _patch(
    obj: object, name: str, make: Callable[[Any], Any], undo: list[Callable[[], None]]
) -> None:
    """Replace ``obj.name`` on the instance by ``make(original)``; ``undo`` puts it back.
    A name the object does not have is left alone (a store without that method)."""
    if not hasattr(obj, name):
        return
    had = name in vars(obj)
    original = getattr(obj, name)
    setattr(obj, name, make(original))

    def restore() -> None:
        if had:
            setattr(obj, name, original)
        else:
            delattr(obj, name)

    undo.append(restore)


class Counting:
    """While active: the store-role calls a turn makes (outermost only: a backend calling
    its own methods is one call), SQLite's statements, PostgreSQL's and Redis's round trips.
    Everything is wrapped on the instances and unwrapped on exit; nothing is timed."""

    def __init__(self, subject: Subject) -> None:
        self.stores = subject.runtime.stores
        self.calls: Counter[str] = Counter()
        self.statements: list[str] = []
        self.pg_round_trips = 0
        self.redis_round_trips = 0
        self.redis_commands: Counter[str] = Counter()
        self._depth = 0
        self._undo: list[Callable[[], None]] = []

    def _role_call(self, name: str) -> Callable[[Any], Any]:
        def make(original: Any) -> Any:
            def counted(*args: Any, **kwargs: Any) -> Any:
                if self._depth == 0:
                    self.calls[name] += 1
                self._depth += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    self._depth -= 1

            return counted

        return make

    def _pg_trip(self, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.pg_round_trips += 1
            return original(*args, **kwargs)

        return counted

    def _redis_command(self, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.redis_round_trips += 1
            self.redis_commands[str(args[0]).upper()] += 1
            return original(*args, **kwargs)

        return counted

    def _redis_pipeline(self, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            pipe = original(*args, **kwargs)

            def execute(run: Any) -> Any:
                def sent(*a: Any, **k: Any) -> Any:
                    self.redis_round_trips += 1
                    for command in pipe.command_stack:
                        self.redis_commands[str(command.args[0]).upper()] += 1
                    return run(*a, **k)

                return sent

            _patch(pipe, "execute", execute, [])
            return pipe

        return counted

    def __enter__(self) -> Counting:
        tasks, sessions = self.stores.tasks, self.stores.sessions
        for obj, names in ((tasks, TASK_METHODS), (sessions, SESSION_METHODS)):
            for name in names:
                _patch(obj, name, self._role_call(name), self._undo)
        db = getattr(tasks, "_db", None)
        if isinstance(db, sqlite3.Connection):
            db.set_trace_callback(self.statements.append)
            self._undo.append(lambda: db.set_trace_callback(None))
        if self.stores.url.startswith(("postgresql:", "postgres:")):
            for name in ("_rows", "_write"):  # one statement each: one round trip
                _patch(tasks, name, self._pg_trip, self._undo)
        client = getattr(sessions, "_redis", None)
        if client is not None:
            _patch(client, "execute_command", self._redis_command, self._undo)
            _patch(client, "pipeline", self._redis_pipeline, self._undo)
        return self

    def __exit__(self, *exc: object) -> None:
        while self._undo:
            self._undo.pop()()


@contextlib.contextmanager
def fsyncs() -> Iterator[list[int]]:
    """fsync + fdatasync calls this process makes meanwhile, counted by ``strace -c``
    attached to it (yields a list that holds the count afterwards; empty where strace is
    missing or may not attach)."""
    found: list[int] = []
    strace = shutil.which("strace")
    if strace is None:
        yield found
        return
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        cmd = [strace, "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name]
        proc = subprocess.Popen(
            [*cmd, "-p", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 5
        while not _traced() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        attached = _traced()
        try:
            yield found
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # detach and write the summary
            proc.wait(10)
        if attached:
            calls = 0
            for line in out.read().splitlines():
                words = line.split()
                if words and words[-1] in ("fsync", "fdatasync"):
                    calls += int(words[3])  # % time, seconds, usecs/call, calls[, errors]
            found.append(calls)


def _traced() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1]) != 0
    return False


class XidMeter:
    """PostgreSQL's next transaction id, read over a connection of its own: it grows only for
    transactions that write (reads get no id), so its delta counts write transactions."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def read(self) -> int:
        row = self.conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


# -- one history length of one store ------------------------------------------------------------
@dataclass
class Row:
    """Numbers for one history length of one store (times in µs, sizes in bytes, per turn)."""

    store: str
    history: int
    turns: int
    turn_p50_us: float
    turn_p95_us: float
    turn_mean_us: float
    cpu_us: float
    written_bytes: float | None
    raw_synchronous: str
    raw_p50_us: float
    raw_p95_us: float
    raw_cpu_us: float
    raw_written_bytes: float | None
    pg_insert_p50_us: float | None = None
    server_cpu_us: float | None = None
    counted_turns: int = 0
    write_transactions: float | None = None
    statements: float | None = None
    statement_kinds: dict[str, float] = field(default_factory=dict)
    pg_round_trips: float | None = None
    redis_round_trips: float | None = None
    redis_commands: dict[str, float] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)
    fsyncs: float | None = None
    raw_fsyncs: float | None = None

    def ratio(self, what: str) -> float | None:
        """Turn ÷ raw append for ``p50``, ``cpu`` or ``written``."""
        turn, raw = {
            "p50": (self.turn_p50_us, self.raw_p50_us),
            "cpu": (self.cpu_us, self.raw_cpu_us),
            "written": (self.written_bytes, self.raw_written_bytes),
        }[what]
        return None if turn is None or not raw else turn / raw

    def reads(self, names: tuple[str, ...]) -> float:
        return sum(self.calls.get(n, 0.0) for n in names)


def statement_kind(sql: str) -> str:
    """``BEGIN IMMEDIATE`` (a write transaction) apart from ``BEGIN`` (a read snapshot)."""
    kind = sql_kind(sql)
    return "BEGIN IMMEDIATE" if sql.upper().startswith("BEGIN IMMEDIATE") else kind


def measure(
    subject: Subject, raw: RawLog, pg_insert: PgInsert | None, window: int, counted: int
) -> Row:
    """``window`` turns timed in blocks interleaved with as many raw appends (and PostgreSQL
    INSERTs, for a PostgreSQL store); then ``counted`` untimed turns with every counter on."""
    history = subject.history()
    gc.collect()
    servers = subject.spec.server_pids
    server0 = server_cpu_s(servers)
    steps: list[Callable[[], object]] = [raw.append, subject.turn]
    if pg_insert is not None:
        steps.insert(1, pg_insert.append)
    blocks = interleave(window, INTERLEAVE, *steps)
    server1 = server_cpu_s(servers)
    raws, turns = blocks[0], blocks[-1]
    assert subject.history() == history + window, "every turn adds exactly one journal entry"
    subject.check_last()
    row = Row(
        store=subject.name,
        history=history,
        turns=window,
        turn_p50_us=statistics.median(turns.samples_ns) / 1e3,
        turn_p95_us=pct(turns.samples_ns, 0.95) / 1e3,
        turn_mean_us=statistics.fmean(turns.samples_ns) / 1e3,
        cpu_us=turns.cpu_s * 1e6 / window,
        written_bytes=None if turns.wchar is None else turns.wchar / window,
        raw_synchronous=raw.synchronous,
        raw_p50_us=statistics.median(raws.samples_ns) / 1e3,
        raw_p95_us=pct(raws.samples_ns, 0.95) / 1e3,
        raw_cpu_us=raws.cpu_s * 1e6 / window,
        raw_written_bytes=None if raws.wchar is None else raws.wchar / window,
    )
    if pg_insert is not None:
        row.pg_insert_p50_us = statistics.median(blocks[1].samples_ns) / 1e3
    if server0 is not None and server1 is not None:
        row.server_cpu_us = (server1 - server0) * 1e6 / window
    count(subject, raw, row, counted)
    return row


def count(subject: Subject, raw: RawLog, row: Row, n: int) -> None:
    """What ``n`` turns did, per turn: store calls, statements, round trips, write
    transactions, fsyncs; and the raw append's fsyncs over as many appends."""
    spec = subject.spec
    xids = XidMeter(spec.url) if spec.postgres else None
    try:
        xid0 = xids.read() if xids else 0
        with Counting(subject) as seen, fsyncs() as synced:
            for _ in range(n):
                subject.turn()
        xid1 = xids.read() if xids else 0
    finally:
        if xids:
            xids.close()
    row.counted_turns = n
    row.calls = {k: v / n for k, v in sorted(seen.calls.items())}
    if spec.sqlite:
        kinds = Counter(statement_kind(s) for s in seen.statements)
        row.statements = len(seen.statements) / n
        row.statement_kinds = {k: v / n for k, v in sorted(kinds.items())}
        row.write_transactions = kinds["BEGIN IMMEDIATE"] / n
        if synced:
            row.fsyncs = synced[0] / n
            with fsyncs() as raw_synced:
                for _ in range(n):
                    raw.append()
            row.raw_fsyncs = raw_synced[0] / n if raw_synced else None
    if spec.postgres:
        row.pg_round_trips = seen.pg_round_trips / n
        row.statements = row.pg_round_trips  # one statement per round trip
        row.write_transactions = (xid1 - xid0) / n
    if spec.cache:
        row.redis_round_trips = seen.redis_round_trips / n
        row.redis_commands = {k: v / n for k, v in sorted(seen.redis_commands.items())}


# -- fresh processes ---------------------------------------------------------------------------
@dataclass
class Fresh:
    """One row of the start-up table (milliseconds)."""

    what: str
    runs: int
    p50_ms: float
    p95_ms: float
    target_ms: float | None


def clean_env() -> dict[str, str]:
    """This environment without RELAYSTATE_* (no model, no store, no failpoints), with
    bench/ on the path for ``--app survey_app:templates``, and byte code cached as an
    installed package has it (PYTHONDONTWRITEBYTECODE would time the compiler instead)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYSTATE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
    return env


def say(args: list[str], text: str) -> float:
    """Wall seconds of one ``relaystate say`` process (checked to have answered)."""
    cmd = [sys.executable, "-m", "relaystate.cli", "say", "--user", "bench", *args, text]
    t = time.perf_counter()
    done = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"relaystate say failed ({done.returncode}): {done.stderr.strip()}")
    return took


def fresh_processes(workdir: Path, runs: int) -> list[Fresh]:
    """The interpreter alone, the import of relaystate.cli, and ``relaystate say`` (the
    survey on SQLite; a demo flight booking's slot-filling turn), each over ``runs``
    processes after one untimed run (compiled files and the page cache warm)."""

    def row(what: str, target: float | None, samples: list[float]) -> Fresh:
        ms = [s * 1e3 for s in samples]
        return Fresh(what, len(ms), statistics.median(ms), pct(ms, 0.95), target)

    def python(code: str) -> float:
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=clean_env(),
            check=True,
            text=True,
            capture_output=True,
        )
        took = time.perf_counter() - t
        return float(out.stdout) if out.stdout.strip() else took

    found = [
        row(
            "python -c pass (the interpreter alone)",
            None,
            [python("pass") for _ in range(runs + 1)][1:],
        )
    ]
    probe = (
        "import time; t=time.perf_counter(); import relaystate.cli; print(time.perf_counter()-t)"
    )
    found.append(
        row(
            "import relaystate.cli (in a fresh interpreter)",
            IMPORT_P50_MS,
            [python(probe) for _ in range(runs + 1)][1:],
        )
    )

    store = ["--store", f"sqlite:///{workdir / 'say.db'}", "--app", "survey_app:templates"]
    say([*store, "--session", SESSION], START)
    survey = [say([*store, "--session", SESSION], answer(i)) for i in range(runs + 1)][1:]
    found.append(row("relaystate say: a survey answer (SQLite FULL)", SAY_P50_MS, survey))

    demo = [
        "--store",
        f"sqlite:///{workdir / 'say-demo.db'}",
        "--ledger",
        str(workdir / "ledger.db"),
    ]
    flights = []
    for i in range(runs + 1):
        session = ["--session", f"d{i}"]
        say([*demo, *session], "I'd like to book a flight from Beijing to Shanghai")
        flights.append(say([*demo, *session], "next Wednesday, business class"))
    found.append(
        row(
            "relaystate say: demo flight booking, dates + cabin (SQLite FULL)",
            SAY_P50_MS,
            flights[1:],
        )
    )
    return found


# -- reporting ---------------------------------------------------------------------------------
def num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def judged(value: float | None, target: float | None, text: str | None = None) -> str:
    """``text`` (the value) green when within the target, red when not, plain without one."""
    shown = text if text is not None else ("—" if value is None else f"{value:.2f}×")
    if value is None or target is None:
        return shown
    colour = "green" if value <= target else "red"
    return f"[{colour}]{shown}[/{colour}]"


def p50_target(spec: Spec) -> float | None:
    return P50_RATIO.get(spec.synchronous) if spec.sqlite else None


def per_store(
    title: str, heads: tuple[str, ...], rows: list[Row], cells: Callable[[Row], list[str]]
) -> Table:
    """A table of rows by store (a section each) and history length."""
    table = Table(title=title, title_justify="left")
    table.add_column("store", no_wrap=True)
    table.add_column("history\n(entries)", justify="right")
    for head in heads:
        table.add_column(head, justify="right")
    last = None
    for r in rows:
        if last is not None and r.store != last:
            table.add_section()
        last = r.store
        table.add_row(r.store, f"{r.history:,}", *cells(r))
    return table


def render_cost(console: Console, rows: list[Row], specs: dict[str, Spec]) -> None:
    def cells(r: Row) -> list[str]:
        spec = specs[r.store]
        local = spec.sqlite  # the client process writes the store's files itself
        return [
            num(r.turn_p50_us),
            num(r.turn_p95_us),
            f"{num(r.raw_p50_us)} {r.raw_synchronous}",
            judged(r.ratio("p50"), p50_target(spec)),
            num(r.cpu_us),
            num(r.raw_cpu_us),
            judged(r.ratio("cpu"), CPU_RATIO),
            num(r.written_bytes),
            num(r.raw_written_bytes),
            judged(r.ratio("written"), BYTES_RATIO) if local else "—",
            num(r.pg_insert_p50_us),
            "—" if r.pg_insert_p50_us is None else f"{r.turn_p50_us / r.pg_insert_p50_us:.2f}×",
        ]

    heads = (
        "turn p50\nµs",
        "turn p95\nµs",
        "raw p50 µs\n(synchronous)",
        "p50 ÷ raw ¹\nFULL ≤1.2×\nNORMAL ≤5×",
        "CPU\nµs/turn",
        "raw CPU\nµs",
        f"CPU ÷ raw ²\n≤{CPU_RATIO:g}×",
        "written\nB/turn",
        "raw\nwritten B",
        f"written ÷\nraw ³ ≤{BYTES_RATIO:g}×",
        "PG INSERT\np50 µs ⁴",
        "turn ÷\nPG INSERT",
    )
    title = "A conversational turn against the raw append, per store and history"
    console.print(per_store(title, heads, rows, cells))


def render_work(console: Console, rows: list[Row], specs: dict[str, Spec]) -> None:
    def cells(r: Row) -> list[str]:
        spec = specs[r.store]
        synced = "—"
        if r.fsyncs is not None:
            text = f"{r.fsyncs:.2f} ({num(r.raw_fsyncs, 2)})"
            synced = judged(r.fsyncs, FSYNCS_PER_TURN if spec.synchronous == "FULL" else None, text)
        if spec.postgres:
            trips = num(r.pg_round_trips, 1)
            if r.redis_round_trips is not None:
                trips += f" + {r.redis_round_trips:.1f}"
            trips = judged(r.pg_round_trips, 2.0, trips)
        else:
            trips = "in-process" if spec.sqlite else "—"
        tx = r.write_transactions
        return [
            "—" if tx is None else judged(tx, 1.0, f"{tx:.2f}"),
            synced,
            num(r.statements, 1),
            trips,
            num(r.calls.get("read_turn", 0.0), 1),
            num(r.reads(TASK_READS), 1),
            num(r.reads(SESSION_READS), 1),
            num(r.calls.get("write", 0.0), 1),
            num(r.calls.get("commit", 0.0), 1),
            num(r.server_cpu_us),
        ]

    heads = (
        "write\ntx ⁵",
        "fsyncs\n(raw) ⁶",
        "SQL\nstatements",
        "round trips\nPG + Redis ⁷",
        "read_turn\n(session +\nopen tasks)",
        "task\nloads",
        "session\nreads",
        "session\nwrites",
        "task\ncommits",
        "server CPU\nµs/turn ⁸",
    )
    console.print(per_store("What one turn does (untimed turns, counted)", heads, rows, cells))


def render_fresh(console: Console, found: list[Fresh]) -> None:
    table = Table(title="A fresh process", title_justify="left")
    table.add_column("what")
    for head in ("runs", "p50 ms", "p95 ms", "target p50"):
        table.add_column(head, justify="right")
    for f in found:
        target = "—" if f.target_ms is None else f"< {f.target_ms:g} ms"
        table.add_row(
            f.what,
            str(f.runs),
            judged(f.p50_ms, f.target_ms, f"{f.p50_ms:,.1f}"),
            f"{f.p95_ms:,.1f}",
            target,
        )
    console.print(table)


def flatness(rows: list[Row]) -> list[str]:
    """Per store: did p50 (and CPU, bytes) stay flat from the shortest history to the longest?"""
    lines, bent = [], []
    for store in dict.fromkeys(r.store for r in rows):
        mine = [r for r in rows if r.store == store]
        first, final = mine[0], mine[-1]
        change = final.turn_p50_us / first.turn_p50_us - 1
        flat = abs(change) <= FLAT
        if not flat:
            bent.append(store)
        mark = "[green]flat[/green]" if flat else "[red]not flat[/red]"
        line = (
            f"{store}: {first.history:,} → {final.history:,} entries: turn p50 "
            f"{first.turn_p50_us:,.0f} → {final.turn_p50_us:,.0f} µs ({change:+.0%}, {mark}); "
            f"CPU/turn {final.cpu_us / first.cpu_us - 1:+.0%}"
        )
        if first.written_bytes and final.written_bytes:
            line += f", written/turn {final.written_bytes / first.written_bytes - 1:+.0%}"
        lines.append(line)
    if rows:
        verdict = (
            f"[green]Flat: every store's turn p50 at the longest history is within "
            f"{FLAT:.0%} of the shortest.[/green]"
            if not bent
            else f"[red]Not flat (p50 moved more than {FLAT:.0%}): {', '.join(bent)}.[/red]"
        )
        lines.append(verdict)
    return lines


def notes(rows: list[Row], window: int) -> str:
    counted = rows[0].counted_turns if rows else 0
    return (
        f"Each history length: {window} turns timed in blocks of {INTERLEAVE}, each block after "
        f"{INTERLEAVE} raw appends (and, for PostgreSQL, {INTERLEAVE} INSERTs), then {counted} "
        "untimed turns with the counters on. History: journal entries of the survey when the "
        "window started (each turn adds one; grown by real turns, not a faster path). Before "
        f"any of it, {WARMUP_TURNS} turns on a survey in another session.\n"
        f"¹ raw append: one {ANSWER_BYTES}-byte row per transaction into its own SQLite WAL "
        "database in the same directory, with the same synchronous (memory:// and PostgreSQL "
        "against FULL, no target).\n"
        "² CPU: user + system CPU of this process (time.process_time) ÷ turns; for PostgreSQL "
        "the server's CPU is apart (⁸).\n"
        "³ written: bytes this process passed to write() on files (/proc/self/io wchar) ÷ turns: "
        "SQLite's WAL frames and, amortised, checkpoints (lumpy: a window with a checkpoint "
        "pays for its pages). Socket sends are not counted, so PostgreSQL and Redis rows show "
        "~0 (no target).\n"
        "⁴ PG INSERT: one ~500-byte row per autocommit INSERT into a database of its own on the "
        "same server, interleaved with the PostgreSQL turns: PostgreSQL's own durable-write "
        "floor, for comparison.\n"
        "⁵ write tx: SQLite: BEGIN IMMEDIATE seen by the connection's trace callback; "
        "PostgreSQL: growth of pg_snapshot_xmax(pg_current_snapshot()) read over a connection "
        "of its own (a transaction gets an id only when it writes). Design: 1 per turn.\n"
        "⁶ fsyncs: fsync + fdatasync calls of this process over the counted turns (strace -c "
        "attached to it), and in brackets over as many raw appends right after; checkpoints "
        f"included. Target at FULL: ≤ {FSYNCS_PER_TURN:g} per turn. PostgreSQL syncs in its "
        "server: see write tx.\n"
        "⁷ round trips: calls of the PostgreSQL store's _rows/_write (one statement each) + Redis "
        "commands sent (a pipeline counts once). Design: 2 on PostgreSQL (the session and its "
        "open tasks in one read, one commit).\n"
        "Store calls (read_turn, task loads = load/load_many/list_tasks, session reads = "
        "get_session/messages, session writes = write in a transaction of its own, task commits "
        "= commit): wrapped on the instances, outermost calls only.\n"
        "⁸ server CPU: CPU time of the PostgreSQL processes (and redis-server) during the timed "
        "window ÷ turns (in clock ticks of 10 ms: coarse)."
    )


# -- main --------------------------------------------------------------------------------------
STORES = ("full", "normal", "memory", "postgres", "redis")


def main(argv: list[str] | None = None) -> int:
    parser = history_options(__doc__)
    parser.add_argument("--counted", type=int, help="counted (untimed) turns per history length")
    parser.add_argument(
        "--stores", default=",".join(STORES), help=f"which, comma-separated ({','.join(STORES)})"
    )
    parser.add_argument("--no-fresh", action="store_true", help="skip the fresh-process table")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.stores.split(",") if s.strip()]
    if set(wanted) - set(STORES):
        parser.error(f"unknown store(s) {', '.join(sorted(set(wanted) - set(STORES)))}")

    sizes = history_sizes(args)
    window = args.window or (100 if args.quick else 300)
    counted = args.counted or (40 if args.quick else 100)
    runs = 8 if args.quick else FRESH_RUNS

    console = make_console(190)
    started = time.perf_counter()
    rows: list[Row] = []
    fresh: list[Fresh] = []
    skipped: list[str] = []
    specs: dict[str, Spec] = {}
    with contextlib.ExitStack() as stack:
        workdir = Path(tempfile.mkdtemp(prefix="relaystate-conversation-", dir=args.dir))
        if args.dir is None:
            stack.callback(shutil.rmtree, workdir, True)
        servers = {"postgres", "redis"} & set(wanted)
        pg, rd = start_services(stack, console) if servers else (None, None)
        facts = {**machine_facts(pg, rd), "directory": str(workdir), "sizes": sizes}
        facts.update(window_turns=window, counted_turns=counted)
        console.print(facts_line(facts))
        console.print(
            f"databases in {workdir}; history lengths {', '.join(f'{s:,}' for s in sizes)}; "
            f"{window} timed + {counted} counted turns per length"
        )
        pids = find_server_pids(pg, rd)
        for key in wanted:
            if key in ("full", "normal"):
                mode = key.upper()
                path = workdir / f"turns-{key}.db"
                url = f"sqlite:///{path}?synchronous={key}"
                specs[f"SQLite {mode}"] = Spec(f"SQLite {mode}", url, synchronous=mode)
            elif key == "memory":
                specs["memory://"] = Spec("memory://", "memory://")
            elif pg is None:
                skipped.append("PostgreSQL" if key == "postgres" else "PostgreSQL+Redis")
            elif key == "postgres":
                url = pg_create(pg, "turns")
                specs["PostgreSQL"] = Spec(
                    "PostgreSQL", url, postgres=True, server_pids=[pids["postgres"]]
                )
            elif rd is None:
                skipped.append("PostgreSQL+Redis")
            else:
                url = pg_create(pg, "turns_cached")
                redis_flush(rd)
                specs["PostgreSQL+Redis"] = Spec(
                    "PostgreSQL+Redis",
                    url,
                    cache=rd,
                    postgres=True,
                    server_pids=[pids["postgres"], pids["redis"]],
                )
        logs: dict[str, RawLog] = {}
        for spec in specs.values():
            if spec.synchronous not in logs:
                path = workdir / f"raw-{spec.synchronous.lower()}.db"
                logs[spec.synchronous] = stack.enter_context(
                    contextlib.closing(RawLog(path, spec.synchronous, ANSWER_BYTES))
                )
        pg_insert = stack.enter_context(contextlib.closing(PgInsert(pg))) if pg else None
        for spec in specs.values():
            subject = Subject(spec)
            try:
                with console.status(f"{spec.name}: warming up"):
                    subject.warm_up(WARMUP_TURNS)
                for size in sizes:
                    grow(subject, size, console)
                    # Nothing live on the screen while timing: a live display writes from a
                    # thread of this process (CPU, and wchar counts terminal writes too).
                    floor = pg_insert if spec.postgres else None
                    rows.append(measure(subject, logs[spec.synchronous], floor, window, counted))
            finally:
                subject.close()
        if not args.no_fresh:
            fresh = fresh_processes(workdir, runs)
    elapsed = time.perf_counter() - started

    render_cost(console, rows, specs)
    render_work(console, rows, specs)
    console.print(notes(rows, window))
    for line in flatness(rows):
        console.print(line)
    for store in dict.fromkeys(r.store for r in rows):
        r = next(r for r in rows if r.store == store)
        said = ", ".join(f"{v:.3g} {k}" for k, v in r.statement_kinds.items())
        calls = ", ".join(f"{v:.3g} {k}" for k, v in r.calls.items())
        line = f"{store}, per turn: store calls {calls}"
        if said:
            line += f"; SQL {said}"
        if r.redis_commands:
            line += "; Redis " + ", ".join(f"{v:.3g} {k}" for k, v in r.redis_commands.items())
        console.print(line)
    if fresh:
        render_fresh(console, fresh)
    if skipped:
        console.print(
            f"[yellow]Skipped (server unavailable, reason above):[/] {', '.join(skipped)}"
        )
    console.print(f"ran in {elapsed:.1f} s")

    results = {"rows": [asdict(r) for r in rows], "skipped": skipped, "targets": TARGETS}
    results["fresh_processes"] = [asdict(f) for f in fresh]
    write_json(console, args.json, facts, results, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
