"""What the benchmark scripts share: statistics, this process's counters, the raw append
every turn is set against, the throwaway servers of ``tests/services.py``, machine facts.

Kept in one place so that ``turns.py``, ``stores.py`` and ``conversation.py`` measure a
turn, a raw append and a server's CPU the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # tests.services (the throwaway servers) and tests.recovery_app
    sys.path.insert(0, str(ROOT))

RAW_WARMUP = 1_200
"""Raw appends before timing: one WAL frame each, so the 1,000-page autocheckpoint has run."""


# -- statistics ------------------------------------------------------------------------------
def pct(samples: list[int] | list[float], q: float) -> float:
    """The q-quantile (0..1) of samples, nearest-rank."""
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return float(ordered[k])


def summary_us(samples_ns: list[int]) -> dict[str, float]:
    us = [s / 1e3 for s in samples_ns]
    return {
        "n": len(us),
        "p50_us": statistics.median(us),
        "p95_us": pct(us, 0.95),
        "p99_us": pct(us, 0.99),
        "mean_us": statistics.fmean(us),
        "max_us": max(us),
    }


def timed(fn: Callable[[], object], n: int) -> list[int]:
    """Wall time of ``n`` calls, each on its own (ns)."""
    samples = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t)
    return samples


# -- this process's counters --------------------------------------------------------------------
def io_counters() -> dict[str, int] | None:
    """This process's I/O counters (Linux ``/proc/self/io``), or None elsewhere."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = int(value)
    return out


@dataclass
class Block:
    """``n`` calls of one thing: wall time of each, and what they cost together."""

    samples_ns: list[int]
    cpu_s: float
    """User + system CPU of this process (``time.process_time``)."""
    wchar: int | None
    """Bytes passed to write()-like calls on files (``/proc/self/io`` wchar; not socket
    sends); None where /proc cannot tell."""
    syscw: int | None


def run_block(fn: Callable[[], object], n: int) -> Block:
    """Call ``fn`` ``n`` times, timing each call, with CPU and written bytes around all."""
    io0, cpu0 = io_counters(), time.process_time()
    samples = timed(fn, n)
    cpu1, io1 = time.process_time(), io_counters()
    if io0 is None or io1 is None:
        return Block(samples, cpu1 - cpu0, None, None)
    return Block(samples, cpu1 - cpu0, io1["wchar"] - io0["wchar"], io1["syscw"] - io0["syscw"])


def merged(blocks: list[Block]) -> Block:
    """Several blocks of the same thing as one."""
    counted = all(b.wchar is not None and b.syscw is not None for b in blocks)
    return Block(
        [x for b in blocks for x in b.samples_ns],
        sum(b.cpu_s for b in blocks),
        sum(b.wchar or 0 for b in blocks) if counted else None,
        sum(b.syscw or 0 for b in blocks) if counted else None,
    )


def interleave(window: int, per_block: int, *steps: Callable[[], object]) -> list[Block]:
    """``window`` calls of each step, in turns of ``per_block`` calls of step 1, then of
    step 2 and so on, so that every step sees the disk as it is at that moment; one merged
    :class:`Block` per step."""
    blocks: list[list[Block]] = [[] for _ in steps]
    for start in range(0, window, per_block):
        n = min(per_block, window - start)
        for i, step in enumerate(steps):
            blocks[i].append(run_block(step, n))
    return [merged(b) for b in blocks]


def files_size(db: Path) -> int:
    """Bytes on disk of a SQLite database: main file + WAL (+ shm is not counted)."""
    total = 0
    for suffix in ("", "-wal"):
        p = db.with_name(db.name + suffix)
        if p.exists():
            total += p.stat().st_size
    return total


def remove_db(path: Path) -> None:
    """A SQLite database and its WAL and shared-memory files, if any."""
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


# -- the raw append -----------------------------------------------------------------------------
@dataclass
class RawAppend:
    synchronous: str
    appends: int
    p50_us: float
    p95_us: float
    file_growth_bytes_per_append: float
    page_growth_bytes_per_append: float
    write_syscall_bytes_per_append: float | None
    write_syscalls_per_append: float | None


class RawLog:
    """The floor: one ``row_bytes`` row appended per transaction to its own WAL database,
    with the ``synchronous`` of the store it is set against."""

    def __init__(self, path: Path, synchronous: str, row_bytes: int = 300) -> None:
        remove_db(path)
        self.path, self.synchronous, self.row_bytes = path, synchronous, row_bytes
        self.db = sqlite3.connect(str(path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute(f"PRAGMA synchronous = {synchronous}")
        self.db.execute(
            "CREATE TABLE log (id INTEGER PRIMARY KEY, at TEXT NOT NULL, data TEXT NOT NULL)"
        )
        self.body = "x" * (row_bytes - 20)  # + the 20-character `at`
        self.n = 0
        for _ in range(RAW_WARMUP):  # past the first checkpoint: the WAL is at its steady size
            self.append()

    def append(self) -> None:
        self.n += 1
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO log (at, data) VALUES (?, ?)", (f"{self.n:020d}", self.body))
        self.db.execute("COMMIT")

    def sample(self, n: int) -> list[int]:
        return timed(self.append, n)

    def used(self) -> int:
        pages, free, size = (
            self.db.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("page_count", "freelist_count", "page_size")
        )
        return int((pages - free) * size)

    def measure(self, n: int) -> RawAppend:
        """``n`` appends in a row, with what they added to the files and passed to write()."""
        size0, used0 = files_size(self.path), self.used()
        block = run_block(self.append, n)
        size1, used1 = files_size(self.path), self.used()
        return RawAppend(
            self.synchronous,
            n,
            statistics.median(block.samples_ns) / 1e3,
            pct(block.samples_ns, 0.95) / 1e3,
            (size1 - size0) / n,
            (used1 - used0) / n,
            None if block.wchar is None else block.wchar / n,
            None if block.syscw is None else block.syscw / n,
        )

    def close(self) -> None:
        self.db.close()


def sql_kind(sql: bytes | str) -> str:
    """The first word of a SQL statement (``SELECT``, ``WITH``, ``BEGIN``...)."""
    text = sql.decode("utf-8", "replace") if isinstance(sql, bytes) else sql
    words = text.lstrip(" \t\r\n(").split(None, 1)
    return words[0].upper().rstrip(";") if words else "?"


# -- servers ------------------------------------------------------------------------------------
def start_services(stack: contextlib.ExitStack, console: Console) -> tuple[str | None, str | None]:
    """PostgreSQL and Redis from tests/services.py, or None with the reason printed."""
    from tests import services

    pg = rd = None
    try:
        pg = stack.enter_context(services.postgres())
        importlib.import_module("relaystate.store.postgres.store")  # fail here, not half-way
    except (services.Unavailable, ImportError, subprocess.CalledProcessError, OSError) as exc:
        console.print(f"[yellow]PostgreSQL unavailable:[/] {exc}; its rows are skipped")
        pg = None
    if pg is not None:
        try:
            rd = stack.enter_context(services.redis())
            importlib.import_module("relaystate.store.redis")
        except (services.Unavailable, ImportError, OSError) as exc:
            console.print(f"[yellow]Redis unavailable:[/] {exc}; PostgreSQL+Redis is skipped")
            rd = None
    return pg, rd


def with_database(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def pg_create(server: str, name: str, template: str | None = None) -> str:
    """A new database on the server (a copy of ``template``'s); returns its URL."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        sql = f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")
        for attempt in range(50):  # a template must have no sessions; pools close lazily
            try:
                conn.execute(sql)
                break
            except psycopg.errors.ObjectInUse:
                if attempt == 49:
                    raise
                time.sleep(0.1)
    return with_database(server, name)


def pg_scalar(url: str, sql: str) -> Any:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)
        row = cur.fetchone() if cur.description else None
    return None if row is None else row[0]


def redis_flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


def proc_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` from the state on (Linux), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def server_cpu_s(roots: list[int]) -> float | None:
    """CPU seconds used so far by these server processes and their children, live or exited
    (PostgreSQL's backends are children of the postmaster, which reaps them: their time then
    moves to its cutime/cstime); None when /proc cannot tell."""
    if not roots:
        return None
    ticks, found = 0, False
    wanted = set(roots)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = proc_fields(int(entry.name))
        if fields is None or len(fields) < 15:
            continue
        if int(entry.name) in wanted:  # its own time + that of its children that exited
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            found = True
        elif int(fields[1]) in wanted:  # a live child (a PostgreSQL backend)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK") if found else None


def find_server_pids(pg_server: str | None, redis_url: str | None) -> dict[str, int]:
    """The postmaster's and redis-server's pids, for their CPU time."""
    pids: dict[str, int] = {}
    if pg_server:
        backend = pg_scalar(pg_server, "SELECT pg_backend_pid()")
        fields = proc_fields(int(backend))
        if fields is not None:
            pids["postgres"] = int(fields[1])  # a backend's parent: the postmaster
    if redis_url:
        import redis

        client = redis.Redis.from_url(redis_url)
        pids["redis"] = int(client.info("server")["process_id"])
        client.close()
    return pids


# -- growing a history -------------------------------------------------------------------------
class Grows(Protocol):
    """A store with a task under test that one ``turn()`` adds one journal entry to."""

    name: str

    def history(self) -> int: ...

    def turn(self) -> object: ...


def grow(subject: Grows, target: int, console: Console) -> None:
    """Run real turns until the task's history has ``target`` entries (with a progress bar)."""
    missing = target - subject.history()
    if missing <= 0:
        return
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{subject.name}: growing history to {target:,}", total=missing)
        for _ in range(missing):
            subject.turn()
            progress.advance(bar)
    assert subject.history() == target, "every turn must add exactly one journal entry"


def history_options(doc: str) -> argparse.ArgumentParser:
    """The options of a script that grows histories: --quick, --json, --dir, --sizes,
    --window (read the sizes with :func:`history_sizes`)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10 and 1,000, small windows")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="where to put the databases (default: temp)")
    parser.add_argument("--sizes", help="comma-separated history lengths, e.g. 10,1000,10000")
    parser.add_argument("--window", type=int, help="timed turns per history length")
    return parser


def history_sizes(args: argparse.Namespace) -> list[int]:
    """History lengths to measure at: 10, 1,000 and 10,000 (--quick: 10 and 1,000)."""
    if args.sizes:
        return sorted(int(s.replace("_", "")) for s in args.sizes.split(","))
    return [10, 1_000] if args.quick else [10, 1_000, 10_000]


# -- reporting ----------------------------------------------------------------------------------
def make_console(width: int = 160) -> Console:
    """A rich console; piped or redirected, at least ``width`` columns so tables stay whole."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, width)
    return console


def progress_bar(console: Console) -> Progress:
    """The progress bar the benchmark scripts show while they set up (hidden when piped)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def write_json(
    console: Console, path: str | None, facts: dict[str, Any], results: dict[str, Any], took: float
) -> None:
    """Keep the numbers (``--json PATH``), when asked to, with the machine they came from."""
    if path:
        out = {"machine": facts, **results, "runtime_seconds": took}
        Path(path).write_text(json.dumps(out, indent=2, default=str) + "\n")
        console.print(f"results written to {path}")


def git_head() -> str | None:
    """The commit of the relaystate checkout this runs against, if it is a git work tree."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_facts(pg_server: str | None = None, redis_url: str | None = None) -> dict[str, Any]:
    """Versions and settings the numbers depend on (the servers' too, when given)."""
    facts: dict[str, Any] = {
        "relaystate_commit": git_head(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    if pg_server:
        import psycopg

        with psycopg.connect(pg_server, autocommit=True) as conn:
            for name in (
                "server_version",
                "fsync",
                "synchronous_commit",
                "wal_sync_method",
                "full_page_writes",
                "shared_buffers",
            ):
                row = conn.execute(f"SHOW {name}").fetchone()
                facts[f"postgres_{name}"] = row[0] if row else None
        facts["psycopg"] = f"{psycopg.__version__} ({psycopg.pq.__impl__})"
    if redis_url:
        import redis

        client = redis.Redis.from_url(redis_url)
        info = client.info("server")
        client.close()
        facts["redis"] = info.get("redis_version")
        facts["redis_py"] = redis.__version__
    return facts


def facts_line(facts: dict[str, Any]) -> str:
    """The header every script prints: what ran, on what."""
    line = (
        f"[bold]Python[/] {facts['python']} ({facts['implementation']})   "
        f"[bold]SQLite[/] {facts['sqlite']}   [bold]CPUs[/] {facts['cpus']}   "
        f"[bold]platform[/] {facts['platform']}   [bold]relaystate[/] "
        f"{facts['relaystate_commit'] or 'unknown commit'}"
    )
    if "postgres_server_version" in facts:
        line += (
            f"\n[bold]PostgreSQL[/] {facts['postgres_server_version']} (fsync="
            f"{facts['postgres_fsync']}, synchronous_commit="
            f"{facts['postgres_synchronous_commit']}, wal_sync_method="
            f"{facts['postgres_wal_sync_method']}, shared_buffers="
            f"{facts['postgres_shared_buffers']})   [bold]psycopg[/] {facts['psycopg']}"
        )
    if "redis" in facts:
        line += f"   [bold]Redis[/] {facts['redis']} (redis-py {facts['redis_py']})"
    return line
