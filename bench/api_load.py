"""How many conversational turns a second does ``relaystate serve`` answer over SQLite, set
against the same server answering ``/healthz``?

Run: ``python bench/api_load.py`` (50 clients, 20 s a phase), ``--quick`` (5 s a phase),
``--clients N``, ``--seconds S``, ``--json PATH`` to keep the numbers. A benchmark, not a
test: it asserts nothing about speed, but every answer must be a 200 and every conversation
must end with its task done; anything else is printed and the script exits 1.

The server is a real ``relaystate serve`` subprocess over a fresh SQLite store
(``synchronous=FULL``, the default) with the demo agents; this process is the load generator:
N clients on one asyncio loop, each its own user with its own API key and its own
``httpx.AsyncClient`` (one kept-alive connection), each waiting for its answer before its next
request (closed loop). Phase 1: every client calls ``GET /healthz`` for the duration: what the
server, the HTTP stack and this client manage with no store at all. Phase 2: every client runs
demo conversations (a flight booking, two refunds), each in a new session, one
``POST /v1/sessions/{id}/messages`` a turn. The ratio turns/s ÷ /healthz req/s says how much of
the HTTP path's capacity a turn leaves. Each phase starts with an unmeasured warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from benchlib import (
    facts_line,
    machine_facts,
    make_console,
    pct,
    progress_bar,
    server_cpu_s,
    write_json,
)
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.server.api_keys import issue

NOW = "2026-11-29T10:00:00"
"""The conversation clock of the server, as in the tests: "Dec 9" is always ahead."""
RATE = 1_000_000.0
"""Requests a second per key (``serve --rate``): far above what one client can send."""
TIMEOUT = 60.0
"""Seconds one request may take before it counts as an error."""
TURN_ROUTE = "/v1/sessions/{session_id}/messages"


@dataclass(frozen=True)
class Script:
    """A demo conversation the agents understand, from the first words to a done task."""

    name: str
    lines: tuple[str, ...]


SCRIPTS = (
    Script(
        "flight",
        ("book a flight from Beijing to Shanghai", "Dec 9, economy, for Alice Wang", "yes"),
    ),
    Script(
        "refund (full)",
        ("I want a refund for order ORD-10001", "it stopped working", "the full amount", "yes"),
    ),
    Script(
        "refund (part)",
        ("I want a refund for order ORD-10002", "wrong colour", "20", "yes"),
    ),
)
"""What each line does: the first opens a session and a task; the middle ones fill slots (the
refund's amount also runs the read-only order look-up); the last confirms, and the task runs
its side effect (create_order, submit_refund) against the demo ledger, a SQLite file too."""


# -- what a phase measured --------------------------------------------------------------------
@dataclass
class Phase:
    """One phase: its answers inside the measured window, and what they cost."""

    name: str
    latencies_s: list[float] = field(default_factory=list)
    by_step: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    """Every answer that was not the expected one, warm-up included, by what it said."""
    conversations: int = 0
    """Conversations that ended with their task done (turns phase, warm-up included)."""
    wall_s: float = 0.0
    """From the end of the warm-up to the last answer to a request sent before the end."""
    cpu_wall_s: float = 0.0
    """From the first CPU sample to the last (the CPU columns are per second of this)."""
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None
    machine_cpu_s: float | None = None
    """Every process's, this one's and the server's included: the rest is other work."""

    @property
    def other_cpu_s(self) -> float | None:
        if self.machine_cpu_s is None or self.server_cpu_s is None:
            return None
        return max(0.0, self.machine_cpu_s - self.client_cpu_s - self.server_cpu_s)

    @property
    def rate(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s else 0.0

    def ms(self, q: float) -> float:
        return pct(self.latencies_s, q) * 1e3 if self.latencies_s else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "requests": len(self.latencies_s),
            "per_second": self.rate,
            "p50_ms": self.ms(0.50),
            "p95_ms": self.ms(0.95),
            "p99_ms": self.ms(0.99),
            "max_ms": self.ms(1.0),
            "errors": dict(self.errors),
            "conversations_done": self.conversations,
            "wall_s": self.wall_s,
            "cpu_wall_s": self.cpu_wall_s,
            "client_cpu_s": self.client_cpu_s,
            "server_cpu_s": self.server_cpu_s,
            "other_cpu_s": self.other_cpu_s,
        }


@dataclass
class Clock:
    """When a phase's measured window opens and closes (``time.perf_counter``)."""

    opens: float
    closes: float
    last_answer: float = 0.0

    def measured(self, sent: float) -> bool:
        return self.opens <= sent < self.closes


def machine_busy_s() -> float | None:
    """CPU seconds all processes on this machine have used since boot (``/proc/stat``: all
    but idle and iowait), or None elsewhere: a shared machine's other work shows."""
    try:
        ticks = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


# -- the server -----------------------------------------------------------------------------
class Server:
    """``relaystate serve`` as a real process over ``store``, its output in a log file."""

    def __init__(self, store: str, ledger: Path, log: Path) -> None:
        from tests.services import free_port  # importable once benchlib set sys.path

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store, self.ledger, self.log = store, ledger, log
        self.env = {**os.environ, "RELAYSTATE_NOW": NOW, "PYTHONUNBUFFERED": "1"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until ``/readyz`` says its store answers."""
        cmd = [sys.executable, "-m", "relaystate.cli", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--rate", f"{RATE:g}"]
        cmd += ["--store", self.store, "--ledger", str(self.ledger)]
        cmd += ["--embedder", "hash"]  # the turn's vectors inline, as measured since issue 9
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server was not ready within 30 s:\n{self.output()}")

    def stop(self) -> None:
        """Terminate it (uvicorn shuts down gracefully on SIGTERM), kill it if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def cpu_s(self) -> float | None:
        return None if self.proc is None else server_cpu_s([self.proc.pid])

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Its Prometheus samples: what it counted itself (statuses, turn time inside it)."""
        text = httpx.get(f"{self.url}/metrics", timeout=TIMEOUT).text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


def issue_keys(store: str, users: int) -> list[str]:
    """One API key per user, issued in this process before the server opens the store: as
    ``relaystate users create`` does, without a Python start-up per user."""
    rt = Runtime(open_store(store), [])
    try:
        return [
            issue(
                rt, Scope.admin("bench"), f"u{i:03d}", name=f"u{i:03d}", admin=False, now=rt.clock()
            )[1]
            for i in range(users)
        ]
    finally:
        rt.close()


# -- the clients ----------------------------------------------------------------------------
async def call(
    client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> tuple[int, str, float, float]:
    """One request: its status (0 when the connection failed), body, start and end."""
    sent = time.perf_counter()
    try:
        answer = await client.request(method, path, json=body)
        status, text = answer.status_code, answer.text
    except httpx.HTTPError as exc:
        status, text = 0, f"{type(exc).__name__}: {exc}"
    return status, text, sent, time.perf_counter()


def failure(phase: Phase, what: str, status: int, text: str) -> None:
    phase.errors[f"{what} → {status or 'no answer'}: {' '.join(text.split())[:300]}"] += 1


async def healthz_client(client: httpx.AsyncClient, clock: Clock, phase: Phase) -> None:
    """``GET /healthz`` until the window closes."""
    while time.perf_counter() < clock.closes:
        status, text, sent, done = await call(client, "GET", "/healthz", None)
        if status != 200:  # an error counts in the warm-up too
            failure(phase, "GET /healthz", status, text)
        elif clock.measured(sent):
            clock.last_answer = max(clock.last_answer, done)
            phase.latencies_s.append(done - sent)


async def turns_client(
    user: str, client: httpx.AsyncClient, clock: Clock, phase: Phase, start: int
) -> None:
    """The demo conversations in turn, each in a new session, until the window closes; a
    conversation left half-way at the end is not checked."""
    n = start
    while time.perf_counter() < clock.closes:
        script = SCRIPTS[n % len(SCRIPTS)]
        session = f"{user}-{n}"
        n += 1
        for step, line in enumerate(script.lines, 1):
            if time.perf_counter() >= clock.closes:
                return
            path = f"/v1/sessions/{session}/messages"
            status, text, sent, done = await call(client, "POST", path, {"text": line})
            if status != 200:  # an error counts in the warm-up too
                failure(phase, f"turn {step} of {script.name}", status, text)
                break
            if clock.measured(sent):
                clock.last_answer = max(clock.last_answer, done)
                phase.latencies_s.append(done - sent)
                phase.by_step.setdefault(f"{script.name}: {step}. {line}", []).append(done - sent)
            if step == len(script.lines):
                task = json.loads(text)["turn"].get("task") or {}
                if task.get("status") == "done":
                    phase.conversations += 1
                else:
                    failure(phase, f"{script.name} not done", status, text)


async def run_phase(
    name: str,
    keys: list[str],
    server: Server,
    warmup: float,
    seconds: float,
    console: Console,
    make: Callable[[int, httpx.AsyncClient, Clock, Phase], Any],
) -> Phase:
    """Every client at once for ``warmup`` + ``seconds``; only the last ``seconds`` count."""
    phase = Phase(name)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=server.url,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=TIMEOUT,
                    limits=limits,
                )
            )
            for key in keys
        ]
        now = time.perf_counter()
        clock = Clock(opens=now + warmup, closes=now + warmup + seconds)
        work = asyncio.gather(*(make(i, c, clock, phase) for i, c in enumerate(clients)))
        with progress_bar(console) as progress:
            bar = progress.add_task(f"{name}: warming up", total=round(warmup + seconds))
            cpu0 = srv0 = all0 = None
            t0 = 0.0
            while not work.done():
                await asyncio.wait([work], timeout=0.25)
                now = time.perf_counter()
                if cpu0 is None and now >= clock.opens:
                    cpu0, srv0, all0 = time.process_time(), server.cpu_s(), machine_busy_s()
                    t0 = now
                    progress.update(bar, description=f"{name}: measuring")
                if now >= clock.closes:
                    progress.update(bar, description=f"{name}: last answers")
                progress.update(bar, completed=min(now - (clock.opens - warmup), warmup + seconds))
            work.result()
        cpu1, srv1, all1 = time.process_time(), server.cpu_s(), machine_busy_s()
        t1 = time.perf_counter()
    phase.wall_s = max(clock.last_answer, clock.closes) - clock.opens
    if cpu0 is not None:
        phase.cpu_wall_s = t1 - t0
        phase.client_cpu_s = cpu1 - cpu0
        if srv0 is not None and srv1 is not None:
            phase.server_cpu_s = srv1 - srv0
        if all0 is not None and all1 is not None:
            phase.machine_cpu_s = all1 - all0
    return phase


# -- reporting ------------------------------------------------------------------------------
def percent(cpu: float | None, wall: float) -> str:
    return "—" if cpu is None or not wall else f"{100 * cpu / wall:.0f} %"


def render(console: Console, health: Phase, turns: Phase, clients: int) -> None:
    table = Table(
        title=f"The HTTP API over SQLite, {clients} concurrent clients (one user and key each)",
        title_justify="left",
    )
    table.add_column("")
    for head in (
        "answers",
        "per second",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "errors",
        "client CPU ¹",
        "server CPU ¹",
        "other CPU ²",
    ):
        table.add_column(head, justify="right")
    for p in (health, turns):
        table.add_row(
            p.name,
            f"{len(p.latencies_s):,}",
            f"{p.rate:,.1f}",
            f"{p.ms(0.5):,.1f}",
            f"{p.ms(0.95):,.1f}",
            f"{p.ms(0.99):,.1f}",
            f"{p.ms(1.0):,.1f}",
            f"[red]{sum(p.errors.values())}[/red]" if p.errors else "0",
            percent(p.client_cpu_s, p.cpu_wall_s),
            percent(p.server_cpu_s, p.cpu_wall_s),
            percent(p.other_cpu_s, p.cpu_wall_s),
        )
    table.add_section()
    ratio = turns.rate / health.rate if health.rate else float("nan")
    table.add_row(
        "[bold]turns ÷ /healthz[/bold]",
        "",
        f"[bold]{ratio:.3f}×[/bold]",
        f"{turns.ms(0.5) / health.ms(0.5):.1f}×",
        f"{turns.ms(0.95) / health.ms(0.95):.1f}×",
        "",
        "",
        "",
        "",
        "",
    )
    console.print(table)

    steps = Table(title="Turn latency by step of the conversation", title_justify="left")
    steps.add_column("conversation: step. what the user says")
    for head in ("turns", "p50 ms", "p95 ms", "p99 ms"):
        steps.add_column(head, justify="right")
    for step in sorted(turns.by_step):
        found = turns.by_step[step]
        steps.add_row(
            step,
            f"{len(found):,}",
            f"{pct(found, 0.5) * 1e3:,.1f}",
            f"{pct(found, 0.95) * 1e3:,.1f}",
            f"{pct(found, 0.99) * 1e3:,.1f}",
        )
    console.print(steps)


def server_side(
    console: Console, before: dict[Any, float], after: dict[Any, float], turns: int
) -> dict[str, Any]:
    """What the server counted during the turns phase (its warm-up included): answers by
    route and status, and the time a turn spent in the handler."""
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    statuses = {
        f"{dict(labels)['method']} {dict(labels)['route']} {dict(labels)['status']}": n
        for (name, labels), n in delta.items()
        if name == "relaystate_http_requests_total"
    }
    count = delta.get(("relaystate_turn_seconds_count", ()), 0.0)
    total = delta.get(("relaystate_turn_seconds_sum", ()), 0.0)
    inside_ms = 1e3 * total / count if count else None
    said = ", ".join(f"{k}: {v:,.0f}" for k, v in sorted(statuses.items()))
    console.print(f"Server, during the turns phase (warm-up included): {said or 'nothing'}.")
    if inside_ms is not None:
        console.print(
            f"Server, time inside the turn handler: mean {inside_ms:,.1f} ms over "
            f"{count:,.0f} turns (the rest of a turn's latency is queueing and HTTP)."
        )
    return {"statuses": statuses, "turn_handler_mean_ms": inside_ms, "client_turns": turns}


def notes(clients: int, warmup: float, seconds: float) -> str:
    return (
        f"Each phase: {clients} clients at once, {warmup:g} s of warm-up, then {seconds:g} s "
        "measured; a request counts when it was sent inside the measured window, and the "
        "window's length runs to the last such answer. Latency: from sending the request to "
        "reading the whole answer, in this process (closed loop: a client sends its next "
        "request when its answer is in, so latency includes the wait in the server's queue).\n"
        "¹ CPU: user + system CPU ÷ the time it was sampled over (the measured window, "
        "within 0.25 s): this load-generating process "
        "(time.process_time), and the server process with its threads (/proc, clock ticks "
        f"of 10 ms). Both share this machine's {os.cpu_count()} CPUs: 100 % is one CPU.\n"
        "² other CPU: what the rest of the machine used meanwhile (/proc/stat, all but idle "
        "and iowait, less the two above): other work on a shared machine takes CPU from both "
        "and makes the numbers lower and noisier."
    )


# -- main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 s a phase (default 20 s)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (50)")
    parser.add_argument("--seconds", type=float, help="measured seconds a phase")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--dir", metavar="DIR", help="keep the store and server log here")
    args = parser.parse_args(argv)
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    seconds = args.seconds or (5.0 if args.quick else 20.0)
    warmup = 1.0 if args.quick else 3.0

    console = make_console(150)
    started = time.perf_counter()
    facts = {**machine_facts(), "clients": args.clients, "seconds": seconds, "warmup": warmup}
    console.print(facts_line(facts))
    with contextlib.ExitStack() as stack:
        workdir = Path(tempfile.mkdtemp(prefix="relaystate-api-load-", dir=args.dir))
        if args.dir is None:
            stack.callback(shutil.rmtree, workdir, True)
        store = f"sqlite:///{workdir / 'api.db'}"
        with console.status(f"{args.clients} users and their API keys"):
            keys = issue_keys(store, args.clients)
        server = Server(store, workdir / "ledger.db", workdir / "server.log")
        stack.callback(server.stop)
        with console.status("starting relaystate serve"):
            server.start()
        console.print(f"relaystate serve on {server.url} over {store}; CPUs: {os.cpu_count()}")

        def health_client(i: int, c: httpx.AsyncClient, clock: Clock, phase: Phase) -> Any:
            return healthz_client(c, clock, phase)

        def turn_client(i: int, c: httpx.AsyncClient, clock: Clock, phase: Phase) -> Any:
            return turns_client(f"u{i:03d}", c, clock, phase, i)

        health = asyncio.run(
            run_phase("GET /healthz", keys, server, warmup, seconds, console, health_client)
        )
        before = server.metrics()
        turns = asyncio.run(
            run_phase("turns (POST messages)", keys, server, warmup, seconds, console, turn_client)
        )
        seen = server_side(console, before, server.metrics(), len(turns.latencies_s))
        server.stop()
        log = server.output()
    elapsed = time.perf_counter() - started

    render(console, health, turns, args.clients)
    console.print(notes(args.clients, warmup, seconds))
    console.print(f"Conversations that ended with their task done: {turns.conversations:,}.")
    odd = [
        line
        for line in log.splitlines()
        if any(w in line for w in ("Traceback", "ERROR", "Error", "locked", "WARNING"))
    ]
    if odd:
        console.print(f"[red]The server's log has {len(odd)} line(s) of errors or warnings:[/red]")
        for line in odd[:20]:
            console.print(f"  {line}", markup=False)
    errors = health.errors + turns.errors
    for what, n in errors.most_common(20):
        console.print(f"[red]{n} ×[/red] {what}", highlight=False)
    console.print(f"ran in {elapsed:.1f} s")

    results = {
        "phases": [health.summary(), turns.summary()],
        "ratio": turns.rate / health.rate if health.rate else None,
        "server": seen,
        "turn_steps": {
            k: {"n": len(v), "p50_ms": pct(v, 0.5) * 1e3, "p95_ms": pct(v, 0.95) * 1e3}
            for k, v in turns.by_step.items()
        },
        "server_log_problems": odd,
        "scripts": [asdict(s) for s in SCRIPTS],
    }
    write_json(console, args.json, facts, results, elapsed)
    return 1 if errors or odd else 0


if __name__ == "__main__":
    sys.exit(main())
