"""A served turn at the limit: ``relaystate serve`` against a minimal ASGI app doing one
durable insert per request (``bench/one_insert.py``), on SQLite and PostgreSQL, at 1, 8 and
50 clients, with a load generator that is not the bottleneck.

Run: ``python bench/http_limit.py`` (5 s a run, 3 alternating repeats), ``--quick`` (1 s, one
repeat, SQLite and 8 clients only), ``--seconds S``, ``--repeats R``, ``--json PATH``.

- **Load**: ``wrk`` (Debian's, compiled C: a few percent of a core at these rates; its CPU
  is printed), closed loop, each connection one request at a time. Every request is a
  first turn in a new Session (``book a flight from Beijing to Shanghai``): a new Task,
  the session, both messages, the turn's memory items and facts, in one write transaction
  (with memory on, as ``serve`` runs). The one-insert app gets the same body.
- **Same settings**: one uvicorn process each, ``log_level=warning``, the same durability;
  systems alternate within each repeat. Each run has an unmeasured 1 s warm-up.
- **Server CPU per request** from /proc (all the server's threads); the same first turn in
  this process (``Conversation.handle`` with memory on) gives the in-process CPU per turn.
- ``serve --workers 2`` on PostgreSQL at 50 clients shows how turns/s scale with processes.

Targets (issue 20): a served turn at >= 0.5x the one-insert app's requests/s; its server CPU
within 1.5x the in-process turn's. Figures are medians with (min-max) over the repeats.
A benchmark, not a test: it exits 1 only when a request fails or a server dies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from benchlib import (
    facts_line,
    machine_facts,
    make_console,
    pg_create,
    server_cpu_s,
    start_services,
    write_json,
)
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.server.api_keys import issue

NOW = "2026-11-29T10:00:00"
TEXT = "book a flight from Beijing to Shanghai"
USERS = 500
"""Users (each an API key) the requests rotate through: a user's own first turns meet the
open Tasks of their earlier ones, as a returning user's would."""
BENCH = Path(__file__).resolve().parent
LUA = """
local counter = 0
local made = 0
function setup(thread)
    made = made + 1
    thread:set("tid", made)
end
function init(args)
    prefix = "w" .. tid .. "-" .. tostring(math.random(1, 1000000000))
end
function request()
    counter = counter + 1
    local path = string.gsub(PATH, "{sid}", prefix .. "-" .. counter)
    return wrk.format("POST", path, HEADERS[(counter % #HEADERS) + 1], BODY)
end
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        'RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d,'
        .. ' "non2xx": %d, "socket_errors": %d}\\n',
        summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
        latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass
class Server:
    """One server process (relaystate serve, or the one-insert app under uvicorn)."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    path: str
    headers: list[dict[str, str]]
    """One set per user the requests rotate through."""

    def cpu_s(self) -> float:
        return server_cpu_s([self.proc.pid]) or 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited:\n{log.read_text(errors='replace')}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.1)
    raise SystemExit(f"the server was not ready within 60 s:\n{log.read_text(errors='replace')}")


def start_relaystate(store: str, work: Path, workers: int = 1) -> Server:
    with Runtime(open_store(store), []) as rt:
        secrets = [
            issue(rt, Scope.admin("bench"), f"u{n}", name="bench", admin=False, now=rt.clock())[1]
            for n in range(USERS)
        ]
    port = free_port()
    env = {**os.environ, "RELAYSTATE_NOW": NOW}
    log = work / f"serve-{port}.log"
    cmd = [sys.executable, "-m", "relaystate.cli", "serve", "--port", str(port)]
    cmd += ["--store", store, "--ledger", str(work / f"ledger-{port}.db"), "--rate", "1e9"]
    cmd += ["--no-demo-key", "--embedder", "hash", "--workers", str(workers)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(f"{url}/healthz", proc, log)
    headers = [
        {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        for secret in secrets
    ]
    name = "relaystate serve" + (f" --workers {workers}" if workers > 1 else "")
    return Server(name, url, proc, "/v1/sessions/{sid}/messages", headers)


def start_one_insert(store: str, work: Path) -> Server:
    port = free_port()
    env = {**os.environ, "ONE_INSERT_STORE": store}
    log = work / f"one-insert-{port}.log"
    cmd = [sys.executable, "-m", "uvicorn", "one_insert:app", "--app-dir", str(BENCH)]
    cmd += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(f"{url}/", proc, log)
    headers = [{"Content-Type": "application/json"}]
    return Server("one-insert app", url, proc, "/insert/{sid}", headers)


def wrk_run(server: Server, clients: int, seconds: float, script: Path) -> dict[str, Any]:
    """One closed-loop wrk run; its figures, the server's CPU and wrk's own."""
    env = dict(os.environ)
    script_file = script.with_name(f"run-{server.proc.pid}.lua")
    headers = (
        "{"
        + ", ".join(
            "{" + ", ".join(f"[{json.dumps(k)}] = {json.dumps(v)}" for k, v in h.items()) + "}"
            for h in server.headers
        )
        + "}"
    )
    body = json.dumps(json.dumps({"text": TEXT}))
    script_file.write_text(
        f"PATH = {json.dumps(server.path)}\nHEADERS = {headers}\nBODY = {body}\n"
        + script.read_text()
    )
    threads = max(1, min(clients, 2))
    cmd = ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds:g}s", "--timeout", "30s"]
    cmd += ["-s", str(script_file), server.url]
    before_cpu = server.cpu_s()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = server.cpu_s() - before_cpu
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    found = json.loads(lines[-1].removeprefix("RESULT "))
    wall = found["duration_us"] / 1e6
    requests = max(found["requests"], 1)
    return {
        "rps": found["requests"] / wall,
        "p50_ms": found["p50_us"] / 1e3,
        "p95_ms": found["p95_us"] / 1e3,
        "server_cpu_ms": cpu * 1e3 / requests,
        "server_cores": cpu / wall,
        "wrk_cores": (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime)
        / wall,
        "failed": found["non2xx"] + found["socket_errors"],
        "requests": found["requests"],
    }


def in_process_cpu_ms(store: str, turns: int, work: Path) -> float:
    """CPU per first turn in this process, memory on as ``serve`` has it (items, facts and
    hashed vectors in the commit): what the server adds is the rest."""
    from relaystate.conversation import Conversation
    from relaystate.demo import templates
    from relaystate.memory.embed import HashEmbedder
    from relaystate.memory.recorder import MemoryLayers, Recorder

    os.environ["RELAYSTATE_NOW"] = NOW
    rt = Runtime(open_store(store), templates(work / "inproc-ledger.db"))
    layers = MemoryLayers.of(rt, embedder=HashEmbedder())  # as `serve --embedder hash`
    conv = Conversation(rt, memory=Recorder(layers, clock=rt.clock))
    for n in range(20):  # warm: the template's derived data, the statement cache
        conv.handle(Scope.user(f"u{n % USERS}"), TEXT, f"warm-{n}")
    samples = []
    for n in range(turns):
        user = Scope.user(f"u{n % USERS}")
        t0 = time.process_time()
        conv.handle(user, TEXT, f"s-{n}")
        samples.append(time.process_time() - t0)
    rt.close()
    return statistics.median(samples) * 1e3


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    low, mid, high = (fmt.format(v) for v in (min(values), statistics.median(values), max(values)))
    return f"{mid} ({low}-{high})"


@contextlib.contextmanager
def servers(store_url: str, work: Path, workers: int) -> Iterator[list[Server]]:
    started: list[Server] = []
    try:
        started.append(start_one_insert(one_insert_store(store_url, work), work))
        started.append(start_relaystate(store_url, work))
        if workers > 1:
            started.append(start_relaystate(store_url, work, workers))
        yield started
    finally:
        for s in started:
            s.stop()


def one_insert_store(store_url: str, work: Path) -> str:
    return f"sqlite:///{work}/one-insert.db" if store_url.startswith("sqlite") else store_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--json", help="keep the numbers in this file")
    args = parser.parse_args()
    console = make_console()
    if shutil.which("wrk") is None:
        console.print("[red]wrk is not installed[/] (apt-get install wrk): nothing measured")
        raise SystemExit(1)
    seconds = args.seconds or (1.0 if args.quick else 5.0)
    repeats = args.repeats or (1 if args.quick else 3)
    client_counts = (8,) if args.quick else (1, 8, 50)
    started = time.perf_counter()
    results: dict[str, Any] = {"runs": [], "in_process_cpu_ms": {}}
    failed = 0
    with contextlib.ExitStack() as stack:
        pg, _ = (None, None) if args.quick else start_services(stack, console)
        facts = machine_facts(pg)
        console.print(facts_line(facts))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="http-limit-")))
        script = work / "turn.lua"
        script.write_text(LUA)
        stores = [("sqlite", f"sqlite:///{work}/relaystate.db")]
        if pg is not None:
            stores.append(("postgres", pg_create(pg, "http_limit")))
        for kind, url in stores:
            results["in_process_cpu_ms"][kind] = in_process_cpu_ms(
                url if kind == "postgres" else f"sqlite:///{work}/inproc.db",
                50 if args.quick else 300,
                work,
            )
            workers = 2 if kind == "postgres" else 1
            with servers(url, work, workers) as running:
                for clients in client_counts:
                    for repeat in range(repeats):
                        order = running if repeat % 2 == 0 else running[::-1]
                        for server in order:
                            if server.name.endswith("--workers 2") and clients != 50:
                                continue
                            wrk_run(server, clients, 1.0, script)  # warm-up, not measured
                            run = wrk_run(server, clients, seconds, script)
                            failed += run["failed"]
                            results["runs"].append(
                                {"store": kind, "clients": clients, "system": server.name, **run}
                            )
                            console.print(
                                f"{kind:8} {clients:3} clients  {server.name:28} "
                                f"{run['rps']:8,.0f}/s  p50 {run['p50_ms']:7.1f} ms  "
                                f"server {run['server_cpu_ms']:5.2f} ms CPU/req  "
                                f"wrk {run['wrk_cores']:4.0%} of a core"
                            )
        report(console, results, client_counts)
        write_json(console, args.json, facts, results, time.perf_counter() - started)
    if failed:
        console.print(f"[red]{failed} requests failed[/]")
        raise SystemExit(1)


def report(console: Console, results: dict[str, Any], client_counts: tuple[int, ...]) -> None:
    table = Table(title="A served turn against one durable insert per request (medians, min-max)")
    for col in ("store", "clients", "system", "req/s", "x one-insert", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right" if col not in ("store", "system") else "left")
    table.add_column("server CPU ms/req", justify="right")
    table.add_column("x in-process", justify="right")
    table.add_column("wrk cores", justify="right")
    runs = results["runs"]
    results["summary"] = []
    for kind in dict.fromkeys(r["store"] for r in runs):
        inproc = results["in_process_cpu_ms"][kind]
        for clients in client_counts:
            base = [
                r["rps"]
                for r in runs
                if (r["store"], r["clients"], r["system"]) == (kind, clients, "one-insert app")
            ]
            for system in dict.fromkeys(r["system"] for r in runs):
                mine = [
                    r
                    for r in runs
                    if (r["store"], r["clients"], r["system"]) == (kind, clients, system)
                ]
                if not mine:
                    continue
                rps = [r["rps"] for r in mine]
                ratio = statistics.median(rps) / statistics.median(base) if base else float("nan")
                cpu = [r["server_cpu_ms"] for r in mine]
                over = statistics.median(cpu) / inproc if system != "one-insert app" else None
                results["summary"].append(
                    {
                        "store": kind,
                        "clients": clients,
                        "system": system,
                        "rps_median": statistics.median(rps),
                        "x_one_insert": ratio,
                        "cpu_x_in_process": over,
                    }
                )
                table.add_row(
                    kind,
                    str(clients),
                    system,
                    spread(rps),
                    "" if system == "one-insert app" else f"{ratio:.2f}x",
                    spread([r["p50_ms"] for r in mine], "{:.1f}"),
                    spread([r["p95_ms"] for r in mine], "{:.1f}"),
                    spread(cpu, "{:.2f}"),
                    "" if over is None else f"{over:.2f}x",
                    spread([r["wrk_cores"] for r in mine], "{:.2f}"),
                )
    console.print(table)
    line = ", ".join(f"{k} {v:.2f} ms" for k, v in results["in_process_cpu_ms"].items())
    console.print(f"in-process CPU per first turn (memory on): {line}")
    console.print("targets: req/s >= 0.5x the one-insert app; server CPU <= 1.5x in-process")


if __name__ == "__main__":
    main()
