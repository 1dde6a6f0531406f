"""SQLite, PostgreSQL and PostgreSQL + Redis side by side: latency, throughput, recovery, trips.

Run: ``python bench/stores.py`` (full, a few minutes), ``--quick`` (smaller sizes, under a
minute) and ``--json PATH`` to keep the numbers. A benchmark, not a test: it asserts nothing
about speed, only that every backend did the work it was given (recovery is verified).

One run answers four questions for each backend:

1. Per-turn write latency of one process on one task, the workload of ``bench/turns.py``:
   ``Runtime.fill`` of a free-text slot with the user's line and the assistant's reply as
   session messages, on a task whose other required slot is never filled (so it never ends).
2. Throughput: N worker *processes*, each with its own task and session (same user), doing
   turns for a fixed time; turns/s in total.
3. Recovery: 10,000 interrupted tasks (a side-effecting ``pay`` left ``running`` under the
   lease of a worker that deregistered, its effect already in the ledger), reconciled by one
   ``relaystate recover`` process and by two at once; afterwards every task must be done with
   exactly one ledger effect and one reconciliation.
4. What one turn costs on the wire: client->server round trips and statements (PostgreSQL,
   counted by a relay that reads the protocol), SQL statements (SQLite, trace callback) and
   Redis commands.

The servers are the throwaway ones of ``tests/services.py`` (PostgreSQL with fsync and
synchronous_commit on, Redis without persistence); SQLite runs with ``synchronous=FULL``.
Where PostgreSQL or Redis cannot run, the reason is printed and their columns are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import resource
import selectors
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchlib import (
    ROOT,
    facts_line,
    find_server_pids,
    machine_facts,
    make_console,
    pg_create,
    pg_scalar,
    progress_bar,
    redis_flush,
    remove_db,
    server_cpu_s,
    sql_kind,
    start_services,
    summary_us,
    with_database,
    write_json,
)
from rich.console import Console
from rich.table import Table
from turns import chat_template, turn_payload  # the same turn as bench/turns.py

from relaystate import JournalEntry, Runtime, Scope, TaskState, TaskStatus, open_store
from relaystate.actions.leases import hostname
from relaystate.model import WorkerInfo, utcnow
from relaystate.store import Commit, Stores

USER = Scope.user("bench-user")
ADMIN = Scope.admin("bench")
PAYER = Scope.user("payer")
APP = "tests.recovery_app:templates"
SQLITE, POSTGRES, CACHED = "SQLite", "PostgreSQL", "PostgreSQL+Redis"
PARTS = ("latency", "throughput", "recovery", "wire")
PROTOTYPE_LEASE = timedelta(hours=1)
"""Lease of the crashed worker over its running ``pay``."""
THROUGHPUT_WARMUP = 10
"""Untimed turns each throughput worker does on its task before the first window."""
WIRE_WARMUP = 20
"""Untimed turns before counting what a turn sends: every pooled connection has prepared."""
WIRE_RECOVERY_TASKS = 200
"""Tasks recovered in-process through the relay to count what one recovery sends."""


@dataclass
class Sizes:
    turns: int
    warmup: int
    procs: list[int]
    duration: float
    tasks: int
    wire_turns: int

    @classmethod
    def pick(cls, quick: bool) -> Sizes:
        if quick:
            return cls(
                turns=100, warmup=250, procs=[1, 4, 8], duration=2.0, tasks=1_000, wire_turns=10
            )
        return cls(
            turns=500, warmup=250, procs=[1, 4, 8], duration=5.0, tasks=10_000, wire_turns=20
        )


# -- backends ----------------------------------------------------------------------------------
def with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"{parts.hostname}:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@dataclass
class Backend:
    """One column of every table: where its databases live and how to open them."""

    name: str
    slug: str
    workdir: Path
    pg_server: str | None = None
    cache: str | None = None
    server_pids: list[int] = field(default_factory=list)
    """PostgreSQL's postmaster and Redis's pid, for their CPU time (children found live)."""

    @property
    def is_sqlite(self) -> bool:
        return self.pg_server is None

    def fresh(self, label: str, template: str | None = None) -> str:
        """The URL of a new, empty database (or a copy of ``template``'s)."""
        if self.pg_server is None:
            path = self.workdir / f"{self.slug}-{label}.db"
            remove_db(path)
            if template is not None:
                shutil.copyfile(template, path)
            return f"sqlite:///{path}"
        return pg_create(self.pg_server, f"{self.slug}_{label}", template)

    def flush_cache(self) -> None:
        if self.cache:
            redis_flush(self.cache)

    def open(self, url: str, cache: str | None = None) -> Stores:
        return open_store(url, cache=cache or self.cache)


# -- 1. latency --------------------------------------------------------------------------------
def measure_latency(backend: Backend, sizes: Sizes) -> dict[str, Any]:
    url = backend.fresh("latency")
    backend.flush_cache()
    rt = Runtime(backend.open(url), [chat_template()])
    try:
        other = rt.start(USER, "endless_chat", session_id="warm-up").task.id
        for i in range(sizes.warmup):
            slots, messages = turn_payload(-i)
            rt.fill(USER, other, slots, session_id="warm-up", messages=messages)
        slots, messages = turn_payload(0)
        task_id = rt.start(
            USER, "endless_chat", session_id="timed", slots=slots, messages=messages
        ).task.id
        gc.collect()
        samples = []
        for i in range(1, sizes.turns + 1):
            slots, messages = turn_payload(i)
            t = time.perf_counter_ns()
            rt.fill(USER, task_id, slots, session_id="timed", messages=messages)
            samples.append(time.perf_counter_ns() - t)
        assert rt.task(USER, task_id).task.version == 1 + sizes.turns, "one entry per turn"
    finally:
        rt.close()
    return summary_us(samples)


# -- 2. throughput -----------------------------------------------------------------------------
def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot (Linux ``/proc/stat``), or None."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def worker_main(config: dict[str, Any]) -> int:
    """One throughput worker process: its own task and session. After ``ready`` it reads
    ``START END`` lines (epoch seconds) from stdin and answers each with one JSON line on the
    turns it finished inside that window; an empty line or end of input stops it."""
    rt = Runtime(open_store(config["url"], cache=config.get("cache")), [chat_template()])
    session = f"worker-{os.getpid()}"
    slots, messages = turn_payload(0)
    task_id = rt.start(
        USER, "endless_chat", session_id=session, slots=slots, messages=messages
    ).task.id
    written = 1
    for i in range(1, config["warmup"] + 1):
        slots, messages = turn_payload(-i)
        rt.fill(USER, task_id, slots, session_id=session, messages=messages)
        written += 1
    print("ready", flush=True)
    i = 0
    for line in sys.stdin:
        if not line.strip():
            break
        start, end = (float(x) for x in line.split())
        time.sleep(max(0.0, start - time.time()))
        cpu0 = time.process_time()
        samples: list[int] = []
        error = None
        try:
            while True:
                i += 1
                slots, messages = turn_payload(i)
                t = time.perf_counter_ns()
                rt.fill(USER, task_id, slots, session_id=session, messages=messages)
                took = time.perf_counter_ns() - t
                written += 1
                if time.time() > end:
                    break  # finished after the deadline: not counted
                samples.append(took)
        except Exception as exc:  # reported, never hidden
            error = f"{type(exc).__name__}: {exc}"
        cpu = time.process_time() - cpu0
        version = rt.task(USER, task_id).task.version
        result = {
            "turns": len(samples),
            "cpu_s": cpu,
            "samples_ns": samples,
            "error": error,
            "lost": written - version if error is None else None,
        }
        print(json.dumps(result), flush=True)
    rt.close()
    return 0


def measure_throughput(backend: Backend, sizes: Sizes) -> list[dict[str, Any]]:
    """One row per entry of ``sizes.procs``: that many of the same worker processes at once."""
    url = backend.fresh("throughput")
    backend.flush_cache()
    config = {"url": url, "cache": backend.cache, "warmup": THROUGHPUT_WARMUP}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(config)]
    workers = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(max(sizes.procs))
    ]
    rows = []
    try:
        for w in workers:
            assert w.stdout is not None
            line = w.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"{backend.name}: a worker did not start ({line!r})")
        for procs in sizes.procs:
            rows.append(throughput_window(workers[:procs], sizes.duration, backend.server_pids))
        for w in workers:
            assert w.stdin is not None
            w.stdin.close()
        for w in workers:
            if w.wait(timeout=60) != 0:
                raise RuntimeError(f"{backend.name}: a worker exited with {w.returncode}")
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    return rows


def throughput_window(
    workers: list[subprocess.Popen[str]], duration: float, servers: list[int]
) -> dict[str, Any]:
    start = time.time() + 0.2
    for w in workers:
        assert w.stdin is not None
        w.stdin.write(f"{start} {start + duration}\n")
        w.stdin.flush()
    time.sleep(max(0.0, start - time.time()))
    cpu0, server0 = cpu_ticks(), server_cpu_s(servers)
    time.sleep(max(0.0, start + duration - time.time()))
    cpu1, server1 = cpu_ticks(), server_cpu_s(servers)
    reports = []
    for w in workers:
        assert w.stdout is not None
        line = w.stdout.readline()
        if not line:
            raise RuntimeError(f"a throughput worker died (exit code {w.wait()})")
        reports.append(json.loads(line))
    errors = [r["error"] for r in reports if r["error"]]
    samples = [x for r in reports for x in r["samples_ns"]]
    total = sum(r["turns"] for r in reports)
    busy = None
    if cpu0 and cpu1 and cpu1[1] > cpu0[1]:
        busy = (cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1])
    return {
        "processes": len(workers),
        "seconds": duration,
        "turns": total,
        "turns_per_s": total / duration,
        "per_process": [r["turns"] for r in reports],
        "latency": summary_us(samples) if samples else None,
        "cpu_busy": busy,
        "client_cpu_ms_per_turn": 1e3 * sum(r["cpu_s"] for r in reports) / total if total else None,
        "server_cpu_ms_per_turn": 1e3 * (server1 - server0) / total
        if total and server0 is not None and server1 is not None
        else None,
        "errors": errors,
        "lost_turns": sum(r["lost"] or 0 for r in reports),
    }


# -- 3. recovery -------------------------------------------------------------------------------
def prototype(ledger: Path) -> tuple[str, str, str, str]:
    """One real interrupted task, made by the runtime on memory://: the mould for the rest.

    Returns (task id, action id, lease owner, JSON of its states and journal entries, one
    per version).
    """
    os.environ["RELAYSTATE_LEDGER"] = str(ledger)
    os.environ["RECOVERY_CRASH"] = "1"
    from tests import recovery_app

    try:
        # A long lease: whenever recovery runs, it is the deregistration of the holder, not
        # the clock, that frees the action (the case recovery exists for).
        rt = Runtime(open_store("memory://"), recovery_app.templates(), lease=PROTOTYPE_LEASE)
        task_id = rt.start(PAYER, "payment", run=False).task.id
        with contextlib.suppress(recovery_app.Crash):
            rt.advance(PAYER, task_id)
            raise RuntimeError("the prototype payment did not crash")
        final = rt.task(PAYER, task_id)
        versions = range(1, final.task.version + 1)
        states = [rt.replay(PAYER, task_id, v).to_dict() for v in versions]
        entries = [e.to_dict() for e in rt.history(PAYER, task_id)[1]]
        assert states[-1] == final.to_dict(), "replaying the journal gives the stored state"
        assert final.task.status == TaskStatus.RUNNING
        assert [str(a.status) for a in final.actions] == ["running"]
        action = final.actions[0]
        assert action.lease_owner is not None and action.idempotency_key.startswith(task_id)
        rt.close()
    finally:
        del os.environ["RECOVERY_CRASH"]
    text = json.dumps({"states": states, "entries": entries})
    return task_id, action.id, action.lease_owner, text


def fabricate(
    store: Stores, n: int, mould: tuple[str, str, str, str], advance: Callable[[], None]
) -> list[tuple[str, str]]:
    """``n`` copies of the prototype, each committed as the runtime did, one commit per
    version (created; pay recorded and claimed running under the lease). Returns
    (task id, idempotency key) pairs."""
    proto_task, proto_action, owner, text = mould
    worker = WorkerInfo(owner, hostname(), os.getpid(), "bench", utcnow())
    store.coordination.register_worker(worker)
    made = []
    for _ in range(n):
        task_id = uuid.uuid4().hex
        d = json.loads(text.replace(proto_task, task_id).replace(proto_action, uuid.uuid4().hex))
        previous: dict[str, Any] | None = None
        for version, (state, entry) in enumerate(zip(d["states"], d["entries"], strict=True), 1):
            touched = [
                a
                for seq, a in state["actions"].items()
                if previous is None or previous["actions"].get(seq) != a
            ]
            full = TaskState.from_dict(state)
            actions = [full.action(int(a["seq"])) for a in touched]
            store.commit(Commit(full, version - 1, actions, JournalEntry.from_dict(entry)))
            previous = state
        made.append((task_id, d["states"][-1]["actions"]["1"]["idempotency_key"]))
        advance()
    store.coordination.deregister_worker(worker, utcnow())  # as Runtime.close(): leases expire
    return made


def fill_ledger(path: Path, keys: list[str]) -> None:
    """What the crashed ``pay`` calls left downstream: one request and one effect per key,
    written as ``Ledger.apply`` writes them, in one transaction."""
    from relaystate.demo.ledger import Ledger

    if not keys:
        return
    Ledger(path).apply(keys[0], "payment", {})  # the first request makes the file and tables
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO requests (idempotency_key, kind, count) VALUES (?, 'payment', 1)",
        [(k,) for k in keys[1:]],
    )
    db.executemany(
        "INSERT INTO effects (idempotency_key, kind, effect) VALUES (?, 'payment', ?)",
        [(k, json.dumps({"id": f"PAY-{i + 1:05d}"})) for i, k in enumerate(keys) if i],
    )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


@dataclass
class RecoverySet:
    """A fabricated backlog to copy: a SQLite file or a PostgreSQL template database."""

    source: str
    tasks: list[tuple[str, str]]
    ledger: Path
    seconds: float
    check_us: float


def build_recovery_set(
    backend: Backend, n: int, mould: tuple[str, str, str, str], console: Console
) -> RecoverySet:
    """Fabricate ``n`` interrupted tasks once per server kind, with durability relaxed while
    fabricating only (SQLite ``synchronous=NORMAL``; PostgreSQL ``synchronous_commit=off`` on
    the source database); the measured copies run with the defaults."""
    started = time.perf_counter()
    if backend.is_sqlite:
        path = backend.workdir / "recovery-source.db"
        remove_db(path)
        store = open_store(f"sqlite:///{path}?synchronous=normal")
        source = str(path)
    else:
        assert backend.pg_server is not None
        source = "recovery_source"
        url = pg_create(backend.pg_server, source)
        pg_scalar(url, f'ALTER DATABASE "{source}" SET synchronous_commit = off')
        store = open_store(url)  # no cache: nothing about a session is fabricated
    label = "SQLite" if backend.is_sqlite else "PostgreSQL"
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{label}: fabricating interrupted tasks", total=n)
        try:
            tasks = fabricate(store, n, mould, lambda: progress.advance(bar))
        finally:
            store.close()
    if backend.is_sqlite:  # everything in the main file, so that copying it copies all
        db = sqlite3.connect(source)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    else:
        assert backend.pg_server is not None
        pg_scalar(
            with_database(backend.pg_server, "postgres"),
            f'ALTER DATABASE "{source}" RESET synchronous_commit',
        )
    ledger = backend.workdir / f"recovery-source-{backend.slug}-ledger.db"
    ledger.unlink(missing_ok=True)
    keys = [key for _, key in tasks]
    fill_ledger(ledger, keys)
    seconds = time.perf_counter() - started
    return RecoverySet(source, tasks, ledger, seconds, check_cost_us(ledger, keys))


def recover_command(url: str, cache: str | None) -> list[str]:
    script = Path(sys.executable).with_name("relaystate")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "relaystate.cli"]
    cmd += ["recover", "--json", "--store", url, "--app", APP]
    return cmd + (["--cache", cache] if cache else [])


def recover_env(ledger: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "RELAYSTATE_LEDGER": str(ledger)}


def run_recover(url: str, cache: str | None, ledger: Path, procs: int) -> dict[str, Any]:
    """Start ``procs`` ``relaystate recover`` processes at once; wall time until all exit."""
    cmd, env = recover_command(url, cache), recover_env(ledger)
    started = time.perf_counter()
    running = [
        subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(procs)
    ]

    def finish(proc: subprocess.Popen[str]) -> tuple[float, str, str]:
        out, err = proc.communicate(timeout=1800)  # each read at once: no pipe fills up
        return time.perf_counter() - started, out, err

    with ThreadPoolExecutor(len(running)) as pool:
        done = list(pool.map(finish, running))
    wall = time.perf_counter() - started
    reports = []
    for proc, (_, out, err) in zip(running, done, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"relaystate recover failed ({proc.returncode}): {err.strip()}")
        reports.append(json.loads(out))
    return {"wall_s": wall, "process_s": [d[0] for d in done], "reports": reports}


def verify_recovery(
    backend: Backend, url: str, ledger: Path, tasks: list[tuple[str, str]]
) -> dict[str, Any]:
    """Every task done, no open action, one reconciliation each, one ledger effect each."""
    from relaystate.demo.ledger import Ledger

    store = backend.open(url)
    try:
        listed = store.tasks.list_tasks(ADMIN, limit=len(tasks) + 100)
        status = {t.id: t.status for t in listed}
        done = sum(status.get(task_id) == TaskStatus.DONE for task_id, _ in tasks)
        left_open = len(store.tasks.open_actions(limit=len(tasks)))
        per_task: Counter[int] = Counter()
        by_worker: Counter[str] = Counter()
        for task_id, _ in tasks:
            journal = store.tasks.journal(task_id, ADMIN)
            takes = [e for e in journal if e.reason.startswith("reconciling pay")]
            per_task[len(takes)] += 1
            by_worker.update(e.actor for e in takes)
    finally:
        store.close()
    entries = {e["idempotency_key"]: e for e in Ledger(ledger).entries()}
    single = sum(
        1
        for _, key in tasks
        if key in entries and entries[key]["requests"] == 1 and entries[key]["effects"] == 1
    )
    ok = (
        done == len(tasks)
        and left_open == 0
        and dict(per_task) == {1: len(tasks)}
        and single == len(tasks) == len(entries)
    )
    return {
        "ok": ok,
        "done": done,
        "open_actions_left": left_open,
        "reconciliations_per_task": {str(k): v for k, v in sorted(per_task.items())},
        "reconciled_by_worker": sorted(by_worker.values(), reverse=True),
        "one_effect_one_request": single,
        "ledger_keys": len(entries),
    }


def measure_recovery(backend: Backend, source: RecoverySet, procs: int) -> dict[str, Any]:
    label = f"recover{procs}"
    n = len(source.tasks)
    url = backend.fresh(label, template=source.source)
    ledger = backend.workdir / f"{backend.slug}-{label}-ledger.db"
    shutil.copyfile(source.ledger, ledger)
    backend.flush_cache()
    children0, server0 = children_cpu_s(), server_cpu_s(backend.server_pids)
    run = run_recover(url, backend.cache, ledger, procs)
    children1, server1 = children_cpu_s(), server_cpu_s(backend.server_pids)
    started = time.perf_counter()
    check = verify_recovery(backend, url, ledger, source.tasks)
    check["verify_s"] = time.perf_counter() - started
    errors = sum(len(r["errors"]) for r in run["reports"])
    return {
        "processes": procs,
        "tasks": n,
        "wall_s": run["wall_s"],
        "process_s": run["process_s"],
        "tasks_per_s": n / run["wall_s"],
        "recover_cpu_ms_per_task": 1e3 * (children1 - children0) / n,
        "server_cpu_ms_per_task": 1e3 * (server1 - server0) / n
        if server0 is not None and server1 is not None
        else None,
        "examined": [r["examined_actions"] for r in run["reports"]],
        "errors": errors,
        **check,
    }


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished (waited-for) children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def check_cost_us(ledger: Path, keys: list[str], n: int = 500) -> float:
    """Median µs of one ``Ledger.status`` call (what the ``check`` of ``pay`` asks)."""
    from relaystate.demo.ledger import Ledger

    target = Ledger(ledger)
    samples = []
    for key in random.Random(0).sample(keys, min(n, len(keys))):
        t = time.perf_counter_ns()
        assert target.status(key) is not None
        samples.append(time.perf_counter_ns() - t)
    return statistics.median(samples) / 1e3


def measure_startup(backend: Backend, ledger_dir: Path) -> float:
    """Wall time of ``relaystate recover`` with nothing to do: interpreter, imports, connect."""
    from relaystate import open_store

    url = backend.fresh("recover-idle")
    open_store(url).close()  # a store that exists, as a deployed one does (recover creates none)
    ledger = ledger_dir / f"{backend.slug}-idle-ledger.db"
    ledger.unlink(missing_ok=True)
    run_recover(url, backend.cache, ledger, 1)  # warms the OS page cache for the imports
    return float(run_recover(url, backend.cache, ledger, 1)["wall_s"])


# -- 4. what crosses the wire ------------------------------------------------------------------
class PgFrontend:
    """Reads the client half of the PostgreSQL protocol: statements executed and syncs."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.ready = False  # past SSLRequest/StartupMessage: typed messages from here on
        self.prepared: dict[bytes, str] = {}
        self.portals: dict[bytes, str] = {}

    def feed(self, data: bytes) -> list[str]:
        """Statement kinds executed by this chunk (``"<sync>"`` for a Sync)."""
        buf, out = self.buf, []
        buf += data
        while True:
            if not self.ready:
                if len(buf) < 8:
                    break
                size = int.from_bytes(buf[0:4], "big")
                if len(buf) < size:
                    break
                code = int.from_bytes(buf[4:8], "big")
                del buf[:size]
                self.ready = code >> 16 == 3  # protocol 3.x startup; else SSL/GSS request
                continue
            if len(buf) < 5:
                break
            size = int.from_bytes(buf[1:5], "big")
            if len(buf) < 1 + size:
                break
            kind, body = chr(buf[0]), bytes(buf[5 : 1 + size])
            del buf[: 1 + size]
            if kind == "Q":
                out.append(sql_kind(body.rstrip(b"\0")))
            elif kind == "P":
                name, _, rest = body.partition(b"\0")
                self.prepared[name] = sql_kind(rest.partition(b"\0")[0])
            elif kind == "B":
                portal, _, rest = body.partition(b"\0")
                self.portals[portal] = self.prepared.get(rest.partition(b"\0")[0], "?")
            elif kind == "E":
                out.append(self.portals.get(body.partition(b"\0")[0], "?"))
            elif kind == "S":
                out.append("<sync>")
        return out


class RespCommands:
    """Reads the client half of RESP: the Redis commands sent."""

    ready = True

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[str]:
        self.buf += data
        out = []
        while self.buf:
            parsed = self._one(self.buf)
            if parsed is None:
                break
            used, name = parsed
            del self.buf[:used]
            out.append(name)
        return out

    @staticmethod
    def _one(buf: bytearray) -> tuple[int, str] | None:
        end = buf.find(b"\r\n")
        if end < 0:
            return None
        if buf[0:1] != b"*":  # an inline command
            return end + 2, bytes(buf[:end]).split(b" ", 1)[0].decode().upper()
        count, pos, name = int(buf[1:end]), end + 2, "?"
        for i in range(count):
            end = buf.find(b"\r\n", pos)
            if end < 0:
                return None
            size = int(buf[pos + 1 : end])
            start, pos = end + 2, end + 2 + size + 2
            if len(buf) < pos:
                return None
            if i == 0:
                name = bytes(buf[start : start + size]).decode().upper()
        return pos, name


class WireRelay:
    """A TCP relay in front of one server that counts what a client sends through it.

    A *round trip* is a client->server flight: data from the client after the server last
    spoke (or first), i.e. one wait of the client for an answer, however many messages it
    pipelines into the flight. Connection set-up before the protocol's start-up is done
    (PostgreSQL SSL/start-up packets) is not counted.
    """

    def __init__(self, target_url: str, protocol: type[PgFrontend] | type[RespCommands]) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 0)
        self.protocol = protocol
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self._stop = False
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._loop, name="wire-relay", daemon=True)
        self._thread.start()

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self.lock:
            return Counter(self.counts), Counter(self.kinds)

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.listener, selectors.EVENT_READ, None)
        while not self._stop:
            for key, _ in sel.select(0.1):
                if key.data is None:
                    client, _ = self.listener.accept()
                    upstream = socket.create_connection(self.target)
                    for s in (client, upstream):
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    pair: dict[str, Any] = {"parser": self.protocol(), "last": None}
                    pair["up"], pair["down"] = upstream, client
                    sel.register(client, selectors.EVENT_READ, (pair, "up"))
                    sel.register(upstream, selectors.EVENT_READ, (pair, "down"))
                    self._socks += [client, upstream]
                    continue
                pair, direction = key.data
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    for s in (pair["up"], pair["down"]):
                        with contextlib.suppress(KeyError, ValueError):
                            sel.unregister(s)
                        s.close()
                    continue
                with contextlib.suppress(OSError):
                    pair[direction].sendall(data)
                with self.lock:
                    self._account(pair, direction, data)
        sel.close()

    def _account(self, pair: dict[str, Any], direction: str, data: bytes) -> None:
        parser = pair["parser"]
        if direction == "down":
            pair["last"] = "down"
            self.counts["bytes_down"] += len(data)
            return
        ready = parser.ready
        if ready and pair["last"] != "up":
            self.counts["round_trips"] += 1
        pair["last"] = "up"
        self.counts["bytes_up"] += len(data)
        for kind in parser.feed(data):
            if kind == "<sync>":
                self.counts["syncs"] += 1
            else:
                self.counts["statements"] += 1
                self.kinds[kind] += 1

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        for s in [self.listener, *self._socks]:
            with contextlib.suppress(OSError):
                s.close()


def per_unit(before: Counter[str], after: Counter[str], turns: int) -> dict[str, float]:
    return {k: (after[k] - before[k]) / turns for k in sorted(set(after) | set(before))}


def count_sent(
    backend: Backend,
    url: str,
    templates: list[Any],
    warm: Callable[[Runtime], object],
    timed: Callable[[Runtime], int],
) -> dict[str, Any]:
    """What ``timed`` sends per unit (it returns how many units it did), after ``warm``.

    SQLite: the statements of the store's connection (trace callback). PostgreSQL and Redis:
    the store is opened through a :class:`WireRelay` per server; write transactions are the
    transaction ids consumed meanwhile (nothing else writes to that database).
    """
    relays: dict[str, WireRelay] = {}
    store_url, cache_url = url, backend.cache
    if not backend.is_sqlite:
        relays["pg"] = WireRelay(url, PgFrontend)
        store_url = with_port(url, relays["pg"].port)
    if backend.cache:
        relays["redis"] = WireRelay(backend.cache, RespCommands)
        cache_url = with_port(backend.cache, relays["redis"].port)
    result: dict[str, Any] = {}
    rt = Runtime(open_store(store_url, cache=cache_url), templates)
    try:
        warm(rt)
        if backend.is_sqlite:
            db = getattr(rt.stores.tasks, "_db", None)
            if not isinstance(db, sqlite3.Connection):
                return result  # not the SQLite store this was written against
            seen: list[str] = []
            db.set_trace_callback(seen.append)
            try:
                n = timed(rt)
            finally:
                db.set_trace_callback(None)
            kinds = Counter(sql_kind(x) for x in seen)
            # BEGIN IMMEDIATE opens a write transaction; a plain BEGIN, a read snapshot.
            writes = sum(1 for x in seen if x.upper().startswith("BEGIN IMMEDIATE"))
            result["sql"] = {
                "statements": len(seen) / n,
                "by_kind": {k: v / n for k, v in sorted(kinds.items())},
                "transactions": writes / n,
            }
        else:
            xmax = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
            xid0 = int(pg_scalar(url, xmax))
            before = {name: relay.snapshot() for name, relay in relays.items()}
            n = timed(rt)
            after = {name: relay.snapshot() for name, relay in relays.items()}
            xid1 = int(pg_scalar(url, xmax))
            for name in relays:
                (c0, k0), (c1, k1) = before[name], after[name]
                result[name] = {**per_unit(c0, c1, n), "by_kind": per_unit(k0, k1, n)}
            result["pg"]["write_transactions"] = (xid1 - xid0) / n
        result["units"] = n
    finally:
        rt.close()
        for relay in relays.values():
            relay.close()
    return result


def measure_wire(backend: Backend, sizes: Sizes) -> dict[str, Any]:
    """Round trips, statements and commands of one turn, averaged over a few turns."""
    url = backend.fresh("wire")
    backend.flush_cache()
    task: list[str] = []

    def turns(rt: Runtime, first: int, count: int) -> int:
        if not task:
            slots, messages = turn_payload(0)
            state = rt.start(
                USER, "endless_chat", session_id="wire", slots=slots, messages=messages
            )
            task.append(state.task.id)
        for i in range(first, first + count):
            slots, messages = turn_payload(i)
            rt.fill(USER, task[0], slots, session_id="wire", messages=messages)
        return count

    # Untimed first: connections opened, statements prepared (psycopg prepares a statement
    # on its 5th use on a connection, with one extra round trip, once per pooled connection).
    return count_sent(
        backend,
        url,
        [chat_template()],
        lambda rt: turns(rt, 1, WIRE_WARMUP),
        lambda rt: turns(rt, 1 + WIRE_WARMUP, sizes.wire_turns),
    )


def measure_wire_recovery(backend: Backend, source: RecoverySet, tasks: int) -> dict[str, Any]:
    """Round trips and statements per recovered task: Runtime.recover() in this process,
    through the relay, on a copy of the fabricated backlog (a first small pass untimed)."""
    url = backend.fresh("wire-recover", template=source.source)
    ledger = backend.workdir / f"{backend.slug}-wire-recover-ledger.db"
    shutil.copyfile(source.ledger, ledger)
    backend.flush_cache()
    os.environ["RELAYSTATE_LEDGER"] = str(ledger)
    from tests import recovery_app

    def recover(rt: Runtime) -> int:
        report = rt.recover(ADMIN, limit=tasks)
        if report.errors:
            raise RuntimeError(f"recovery failed: {next(iter(report.errors.values()))}")
        return len(report.resumed)

    return count_sent(
        backend,
        url,
        recovery_app.templates(),
        lambda rt: rt.recover(ADMIN, limit=10),  # connections, prepared statements, the worker row
        recover,
    )


def background_load(seconds: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over ``seconds`` while this benchmark runs nothing."""
    before = cpu_ticks()
    time.sleep(seconds)
    after = cpu_ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


# -- reporting ---------------------------------------------------------------------------------
def num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def ms(us_value: float | None) -> str:
    return "—" if us_value is None else f"{us_value / 1e3:,.2f}"


def render_latency(console: Console, names: list[str], results: dict[str, Any]) -> None:
    table = Table(title="1. Per-turn write latency (one process, one task)", title_justify="left")
    table.add_column("store", no_wrap=True)
    for head in ("turns", "p50 µs", "p95 µs", "p99 µs", "mean µs", "max µs", "p50 ÷ SQLite"):
        table.add_column(head, justify="right")
    base = results.get(SQLITE, {}).get("p50_us")
    for name in names:
        r = results[name]
        table.add_row(
            name,
            f"{r['n']:,}",
            num(r["p50_us"]),
            num(r["p95_us"]),
            num(r["p99_us"]),
            num(r["mean_us"]),
            num(r["max_us"]),
            f"{r['p50_us'] / base:.2f}×" if base else "—",
        )
    console.print(table)


def render_throughput(console: Console, names: list[str], results: dict[str, Any]) -> None:
    table = Table(
        title="2. Throughput: N worker processes, one task each, same user",
        title_justify="left",
    )
    table.add_column("store", no_wrap=True)
    for head in (
        "processes",
        "turns",
        "turns/s",
        "× 1 process",
        "turns per process",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "CPUs busy",
        "worker CPU\nms/turn",
        "server CPU\nms/turn",
        "checked",
    ):
        table.add_column(head, justify="right")
    for name in names:
        rows = results[name]
        one = rows[0]["turns_per_s"] if rows and rows[0]["processes"] == 1 else None
        for r in rows:
            lat = r["latency"] or {}
            per = r["per_process"]
            table.add_row(
                name,
                str(r["processes"]),
                f"{r['turns']:,}",
                num(r["turns_per_s"]),
                f"{r['turns_per_s'] / one:.2f}×" if one else "—",
                f"{min(per):,}–{max(per):,}" if len(per) > 1 else f"{per[0]:,}",
                ms(lat.get("p50_us")),
                ms(lat.get("p95_us")),
                ms(lat.get("p99_us")),
                "—" if r["cpu_busy"] is None else f"{r['cpu_busy']:.0%}",
                num(r["client_cpu_ms_per_turn"], 2),
                num(r["server_cpu_ms_per_turn"], 2),
                "[green]✓[/green]"
                if not r["errors"] and not r["lost_turns"]
                else f"[red]✗ {len(r['errors'])} errors, {r['lost_turns']} lost[/red]",
            )
        table.add_section()
    console.print(table)
    for name in names:
        for r in results[name]:
            for error in r["errors"]:
                console.print(f"[red]{name}, {r['processes']} processes:[/] {error}")


def render_recovery(console: Console, names: list[str], results: dict[str, Any]) -> None:
    table = Table(
        title="3. Recovery of interrupted tasks (relaystate recover processes)",
        title_justify="left",
    )
    table.add_column("store", no_wrap=True)
    for head in (
        "tasks",
        "processes",
        "wall s",
        "tasks/s",
        "× 1 process",
        "idle start s",
        "recover CPU\nms/task",
        "server CPU\nms/task",
        "reconciled by each",
        "verified",
    ):
        table.add_column(head, justify="right")
    for name in names:
        r = results[name]
        one = None
        for run in r["runs"]:
            one = one or run["tasks_per_s"]
            ok = run["ok"] and run["errors"] == 0
            table.add_row(
                name,
                f"{run['tasks']:,}",
                str(run["processes"]),
                num(run["wall_s"], 1),
                num(run["tasks_per_s"]),
                f"{run['tasks_per_s'] / one:.2f}×",
                num(r["idle_start_s"], 2),
                num(run["recover_cpu_ms_per_task"], 2),
                num(run["server_cpu_ms_per_task"], 2),
                " / ".join(f"{v:,}" for v in run["reconciled_by_worker"]),
                "[green]✓[/green]" if ok else "[red]✗[/red]",
            )
        table.add_section()
    console.print(table)


def kinds_text(by_kind: dict[str, float]) -> str:
    ordered = sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{v:.3g} {k}" for k, v in ordered if v)


def wire_row(name: str, unit: str, r: dict[str, Any]) -> list[str]:
    if "sql" in r:
        sql = r["sql"]
        return [
            name,
            unit,
            "0 (in-process)",
            num(sql["statements"], 1),
            kinds_text(sql["by_kind"]),
            num(sql["transactions"], 1),
            "—",
            "—",
            "—",
        ]
    if "pg" not in r:
        return [name, unit, *["—"] * 7]
    pg, rd = r["pg"], r.get("redis")
    return [
        name,
        unit,
        num(pg.get("round_trips"), 1),
        num(pg.get("statements"), 1),
        kinds_text(pg["by_kind"]),
        num(pg.get("write_transactions"), 1),
        f"{num(pg.get('bytes_up'))} / {num(pg.get('bytes_down'))}",
        num(rd.get("round_trips"), 1) if rd else "—",
        (kinds_text(rd["by_kind"]) or "none") if rd else "—",
    ]


def render_wire(
    console: Console, names: list[str], turns: dict[str, Any], recoveries: dict[str, Any]
) -> None:
    table = Table(
        title="4. What one turn (and one recovery) sends, on average", title_justify="left"
    )
    table.add_column("store", no_wrap=True)
    table.add_column("per")
    table.add_column("database\nround trips", justify="right")
    table.add_column("statements", justify="right")
    table.add_column("by kind")
    table.add_column("write\ntransactions", justify="right")
    table.add_column("bytes\nup / down", justify="right")
    table.add_column("Redis\nround trips", justify="right")
    table.add_column("Redis commands")
    for name in names:
        if name in turns:
            table.add_row(*wire_row(name, "turn", turns[name]))
    if recoveries:
        table.add_section()
    for name in names:
        if name in recoveries:
            table.add_row(*wire_row(name, "recovered task", recoveries[name]))
    console.print(table)


def report(
    console: Console,
    names: list[str],
    results: dict[str, Any],
    sizes: Sizes,
    facts: dict[str, Any],
) -> None:
    """The four tables, each with footnotes saying exactly what was measured."""
    if results["latency"]:
        render_latency(console, names, results["latency"])
        note = (
            f"Each store: {sizes.warmup} warm-up turns on another task, then {sizes.turns} timed "
            "turns on one task, each a Runtime.fill(run=True) of one slot + 2 session messages "
            "(the turn of bench/turns.py), timed around the call in the one process doing it, "
            "on a fresh database."
        )
        if CACHED in results["latency"]:
            note += (
                " PostgreSQL+Redis: the same, with the Redis session cache in front; its "
                "session read and write-through (one Lua script) are part of the turn."
            )
        console.print(note)
    if results["throughput"]:
        render_throughput(console, names, results["throughput"])
        console.print(
            f"{max(sizes.procs)} worker processes per store (one database per store), each with "
            f"its own task and session, same user, {THROUGHPUT_WARMUP} untimed warm-up turns; "
            f"then, row by row, N of them do turns together for {sizes.duration:g} s while the "
            f"others wait. turns/s = turns finished inside the window ÷ {sizes.duration:g} s (a "
            "turn ending after it is not counted). Latency percentiles: over all turns of all N "
            "processes. CPUs busy: all CPUs over the window (/proc/stat), the servers included; "
            "worker CPU: CPU time of the N workers ÷ turns; server CPU: CPU time of the "
            "PostgreSQL processes (postmaster and children) and redis-server in the window ÷ "
            "turns (CPUs busy beyond both: kernel threads, interrupts, other processes). The "
            "servers run on the same "
            f"{facts['cpus']} CPUs as the workers. Every process checks that its task's version "
            "grew by exactly its turns (no lost update)."
        )
    if results["recovery"]:
        render_recovery(console, names, results["recovery"])
        checks = ", ".join(
            f"{r['source']} {r['check_us']:,.0f}"
            for r in {r["source"]: r for r in results["recovery"].values()}.values()
        )
        fabricated = ", ".join(
            f"{r['source']} {r['fabricate_s']:.1f} s"
            for r in {r["source"]: r for r in results["recovery"].values()}.values()
        )
        console.print(
            f"Each row recovers its own copy of {sizes.tasks:,} interrupted tasks: a payment "
            "whose side-effecting `pay` (idempotent=False, with a check) is `running` under the "
            "1-hour lease of a worker that then deregistered, its effect already in the downstream "
            "ledger (a SQLite file). One task was made by the runtime (tests/recovery_app.py, "
            "crashing after the effect); the rest are copies of its commits (one per version) "
            "with new ids and keys, written through Stores.commit (fabricated once per server "
            "with relaxed "
            f"durability, then copied: {fabricated}; not timed). wall s: from starting the "
            "`relaystate recover --json` process(es) to the last exit, interpreter start-up "
            "included; idle start: the same command on an empty store. recover CPU: user + "
            "system CPU of the recover process(es) ÷ tasks (start-up included); server CPU: of "
            "the PostgreSQL and Redis processes meanwhile ÷ tasks. One `check` (Ledger.status, "
            f"a new SQLite connection per call) takes {checks} µs (median; per source). Each "
            "recovery: take "
            "(running → unknown under the recoverer's lease), check the ledger, settle "
            "(success, task done). Verified afterwards: all tasks done, no open action, exactly "
            "one `reconciling pay` journal entry per task, exactly one request and one effect per "
            "key in the ledger; 'reconciled by each' splits those entries by recover process."
        )
    if results["wire"]:
        render_wire(console, names, results["wire"], results["wire_recovery"])
        console.print(
            f"Averaged over {sizes.wire_turns} turns after {WIRE_WARMUP} untimed ones (by then "
            "psycopg has prepared the statements on every pooled connection: preparing costs one "
            "extra round trip per statement and connection, once). SQLite: every "
            "statement the store's connection ran (sqlite3 trace callback), BEGIN/COMMIT "
            "included. PostgreSQL and Redis: the store talks to its server through a TCP relay "
            "that reads the client half of the protocol. Round trip = one client→server flight "
            "after the server last spoke (one wait for an answer, however many messages are "
            "pipelined into it); statements = simple Query messages + extended-protocol Execute "
            "messages, by first SQL word of their text (BEGIN/COMMIT included); write "
            "transactions = transaction ids the turns consumed (pg_current_snapshot xmax); "
            "bytes are TCP payload through the relay. Redis: commands by name."
        )
    if results["wire_recovery"]:
        console.print(
            f"Per recovered task: Runtime.recover(limit={WIRE_RECOVERY_TASKS}) in this process "
            "(after an untimed recover(limit=10)), through the same relay, on another copy of the "
            "backlog of table 3, divided by the tasks it resumed; the pass's own scans "
            "(open_actions, list_tasks, stopped_workers) are included, amortised. The `check` "
            "reads the ledger, a separate local SQLite file: not counted."
        )


# -- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="where to put SQLite files (default: temp)")
    parser.add_argument("--tasks", type=int, help="interrupted tasks to recover")
    parser.add_argument("--turns", type=int, help="timed turns for the latency table")
    parser.add_argument("--duration", type=float, help="seconds of each throughput run")
    parser.add_argument("--procs", help="worker processes to try, e.g. 1,4,8")
    parser.add_argument("--sqlite-only", action="store_true", help="do not start any server")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"which questions to answer, comma-separated (default: {','.join(PARTS)})",
    )
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(json.loads(args.worker))
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))}; known: {', '.join(PARTS)}")

    sizes = Sizes.pick(args.quick)
    sizes.tasks = args.tasks or sizes.tasks
    sizes.turns = args.turns or sizes.turns
    sizes.duration = args.duration or sizes.duration
    if args.procs:
        sizes.procs = [int(p) for p in args.procs.split(",")]

    console = make_console(170)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-stores-", dir=args.dir))
    results: dict[str, Any] = {
        "latency": {},
        "throughput": {},
        "recovery": {},
        "wire": {},
        "wire_recovery": {},
    }
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, True)
        pg, rd = (None, None) if args.sqlite_only else start_services(stack, console)
        backends = [Backend(SQLITE, "sqlite", workdir)]
        if pg:
            backends.append(Backend(POSTGRES, "pg", workdir, pg_server=pg))
            if rd:
                backends.append(Backend(CACHED, "pgredis", workdir, pg_server=pg, cache=rd))
        pids = find_server_pids(pg, rd)
        for b in backends:
            b.server_pids = [pids["postgres"]] if b.pg_server and "postgres" in pids else []
            if b.cache and "redis" in pids:
                b.server_pids.append(pids["redis"])
        facts = machine_facts(pg, rd)
        facts.update(directory=str(workdir), sizes=sizes.__dict__)
        line = facts_line(facts)
        facts["background_cpu_busy"] = background_load()
        line += "\nCPU busy before starting (1 s, nothing of ours running): "
        line += (
            f"{facts['background_cpu_busy']:.0%}"
            if facts["background_cpu_busy"] is not None
            else "unknown"
        )
        console.print(line)
        if (facts["background_cpu_busy"] or 0) > 0.1:
            console.print(
                "[yellow]Other processes are using the CPUs: the numbers below are disturbed; "
                "run again on a quiet machine.[/]"
            )
        names = [b.name for b in backends]
        phases: defaultdict[str, float] = defaultdict(float)

        @contextlib.contextmanager
        def phase(name: str, what: str) -> Iterator[None]:
            t = time.perf_counter()
            with console.status(what):
                yield
            phases[name] += time.perf_counter() - t

        for b in backends if "latency" in parts else []:
            with phase("latency", f"{b.name}: latency"):
                results["latency"][b.name] = measure_latency(b, sizes)
        for b in backends if "wire" in parts else []:
            with phase("wire", f"{b.name}: what a turn sends"):
                results["wire"][b.name] = measure_wire(b, sizes)
        for b in backends if "throughput" in parts else []:
            what = f"{b.name}: {', '.join(map(str, sizes.procs))} worker processes"
            with phase("throughput", what):
                results["throughput"][b.name] = measure_throughput(b, sizes)

        mould = prototype(workdir / "prototype-ledger.db")
        sources: dict[str, RecoverySet] = {}
        for b in backends if "recovery" in parts else []:
            kind = "sqlite" if b.is_sqlite else "pg"
            if kind not in sources:
                t = time.perf_counter()
                sources[kind] = build_recovery_set(b, sizes.tasks, mould, console)
                phases["fabricate"] += time.perf_counter() - t
            source = sources[kind]
            with phase("recovery", f"{b.name}: recover on an empty store"):
                idle = measure_startup(b, workdir)
            runs = []
            for procs in (1, 2):
                what = f"{b.name}: {procs} recover process(es) on {sizes.tasks:,} tasks"
                with phase("recovery", what):
                    runs.append(measure_recovery(b, source, procs))
            if "wire" in parts:
                with phase("wire", f"{b.name}: what recovering a task sends"):
                    results["wire_recovery"][b.name] = measure_wire_recovery(
                        b, source, WIRE_RECOVERY_TASKS
                    )
            results["recovery"][b.name] = {
                "source": "SQLite" if b.is_sqlite else "PostgreSQL",
                "fabricate_s": source.seconds,
                "check_us": source.check_us,
                "idle_start_s": idle,
                "runs": runs,
            }
    elapsed = time.perf_counter() - started
    results["phase_seconds"] = dict(phases)

    report(console, names, results, sizes, facts)
    spent = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
    console.print(f"ran in {elapsed:.1f} s ({spent}; the rest: servers and set-up)")

    write_json(console, args.json, facts, results, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
