"""``make bench-compare``: relaystate against LangGraph and DBOS on the same workloads, side
by side with the physical limit (a raw append or insert with the same durability).

Run: ``make bench-compare`` (it makes ``.venv-compare`` with LangGraph's SQLite and
PostgreSQL checkpointers and DBOS, apart from the project's environment), or
``python bench/compare/run.py [--quick] [--repeats N] [--no-postgres] [--no-http]``.

Workloads (each side in processes of its own, systems alternating within every repeat;
every figure the median, with min-max over the repeats):

1. **A turn as history grows** (10 to 10,000 turns; LangGraph to ``--langgraph-max``, 2,000
   by default: it writes its whole message list at every checkpoint, so its run grows with
   the square of the history): time a turn, bytes written a turn (SQLite: what the process
   hands to write(2); PostgreSQL: WAL bytes, from the WAL position), durable syncs a turn
   (SQLite: fsync and fdatasync counted by strace in a run of its own; PostgreSQL: not
   counted, one WAL flush a commit), the store's size.
2. **Resume in a fresh process** at 10 turns and at the end of that history: open the store,
   read the state (the driver's import is done before the clock starts).
3. **Durable side effects**: a two-step order (pay, ship), each step a ledger write:
   relaystate's Actions (recorded before the effect, journaled) against DBOS steps.
4. **Duplicate effects under SIGKILL**: the payment's process is killed right after the
   effect, before the step is recorded; a new process resumes. Payments the ledger holds
   beyond one per order are duplicates.
5. **HTTP**: ``bench/http_limit.py``'s served turn against the one-insert app.

Tables on the terminal; the numbers in ``bench/results/compare.json``, charts in
``bench/results/compare-*.png``, the tables in ``BENCHMARKS.md`` (between its markers).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from benchlib import machine_facts, make_console, pg_create, start_services  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

COMPARE_PY = ROOT / ".venv-compare" / "bin" / "python"
MAIN_PY = Path(sys.executable)
RESULTS = ROOT / "bench" / "results"
BEGIN, END = "<!-- bench-compare:begin -->", "<!-- bench-compare:end -->"
CRASHES = 5
"""Orders killed after their payment, per system and store."""


def side(system: str) -> tuple[Path, Path]:
    """The interpreter and script of a system's side."""
    if system in ("relaystate", "raw"):
        return MAIN_PY, HERE / "relaystate_side.py"
    return COMPARE_PY, HERE / f"{system}_side.py"


def run_side(
    system: str, *args: str, check: bool = True, timeout: float = 3600
) -> list[dict[str, Any]]:
    py, script = side(system)
    cmd = [str(py), str(script), *args]
    if system == "raw" and args and args[0] in ("grow", "effects"):
        cmd.append("--raw")
    done = subprocess.run(
        cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def fsyncs_per_turn(system: str, store: str, turns: int) -> float | None:
    """fsync + fdatasync calls per turn of a growth run of its own, counted by strace."""
    strace = shutil.which("strace")
    if strace is None or not store.startswith("sqlite"):
        return None
    py, script = side(system)
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        cmd = [strace, "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name]
        cmd += [str(py), str(script), "grow", "--store", store, "--marks", str(turns)]
        cmd += ["--window", "1"] + (["--raw"] if system == "raw" else [])
        subprocess.run(cmd, cwd=HERE, capture_output=True, check=True, timeout=600)
        calls = 0
        for line in Path(out.name).read_text().splitlines():
            words = line.split()
            if words and words[-1] in ("fsync", "fdatasync"):
                calls += int(words[3] if len(words) >= 5 else words[2])
    return calls / turns


class Stores:
    """A fresh store per run: a SQLite file, or a PostgreSQL database of its own."""

    def __init__(self, work: Path, pg: str | None) -> None:
        self.work, self.pg, self.n = work, pg, 0

    def new(self, kind: str, label: str) -> str:
        self.n += 1
        if kind == "sqlite":
            folder = self.work / f"{label}-{self.n}"
            folder.mkdir()
            return f"sqlite:///{folder}/store.db"
        assert self.pg is not None
        return pg_create(self.pg, f"cmp_{re.sub(r'[^a-z0-9]', '_', label)}_{self.n}")


def spread(values: list[float], fmt: str = "{:,.2f}") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mid = fmt.format(statistics.median(values))
    if len(values) == 1:
        return mid
    return f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def versions() -> dict[str, str]:
    found = {
        "relaystate": importlib.metadata.version("relaystate"),
        "python": platform.python_version(),
    }
    if COMPARE_PY.exists():
        code = (
            "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in"
            " ('langgraph', 'langgraph-checkpoint-sqlite', 'langgraph-checkpoint-postgres',"
            " 'dbos')}))"
        )
        out = subprocess.run(
            [str(COMPARE_PY), "-c", code], capture_output=True, text=True, check=True
        )
        found.update(json.loads(out.stdout))
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small histories, one repeat")
    p.add_argument("--repeats", type=int)
    p.add_argument("--langgraph-max", type=int, default=2000)
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--no-http", action="store_true")
    p.add_argument(
        "--json", help=f"keep the numbers here (default: a full run, {RESULTS}/compare.json)"
    )
    args = p.parse_args()
    console = make_console()
    if not COMPARE_PY.exists():
        console.print(f"[red]{COMPARE_PY} is missing[/]: run `make bench-compare`, which makes it")
        raise SystemExit(1)
    repeats = args.repeats or (1 if args.quick else 3)
    marks = [10, 100] if args.quick else [10, 100, 1000, 10000]
    lg_marks = [m for m in marks if m <= args.langgraph_max]
    if not args.quick and args.langgraph_max not in lg_marks:
        lg_marks.append(args.langgraph_max)
    window = 20 if args.quick else 50
    started = time.perf_counter()
    results: dict[str, Any] = {"grow": [], "resume": [], "effects": [], "crashes": [], "fsyncs": []}
    with contextlib.ExitStack() as stack:
        pg = None if args.no_postgres or args.quick else start_services(stack, console)[0]
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-compare-")))
        stores = Stores(work, pg)
        kinds = ["sqlite"] + (["postgres"] if pg else [])
        facts = machine_facts(pg)
        facts["versions"] = versions()
        console.print(f"[bold]versions[/] {facts['versions']}")
        for kind in kinds:
            for repeat in range(repeats):
                order = ["raw", "relaystate", "langgraph"]
                for system in order if repeat % 2 == 0 else order[::-1]:
                    these = lg_marks if system == "langgraph" else marks
                    store = stores.new(kind, f"{system}-{kind}")
                    t0 = time.perf_counter()
                    rows = run_side(
                        system,
                        "grow",
                        "--store",
                        store,
                        "--marks",
                        ",".join(map(str, these)),
                        "--window",
                        str(window),
                    )
                    for row in rows:
                        results["grow"].append(
                            {"store": kind, "system": system, "repeat": repeat, **row}
                        )
                    console.print(
                        f"grow   {kind:8} {system:10} to {these[-1]:>6,} turns"
                        f" in {time.perf_counter() - t0:6.1f} s"
                    )
                    if system != "raw":
                        small = stores.new(kind, f"{system}-{kind}-small")
                        run_side(system, "grow", "--store", small, "--marks", "10", "--window", "1")
                        for where in (small, store):  # 10 turns, and the whole history
                            for _ in range(5):
                                (r,) = run_side(system, "resume", "--store", where)
                                results["resume"].append(
                                    {"store": kind, "system": system, "repeat": repeat, **r}
                                )
                for system in (
                    ["raw", "relaystate", "dbos"]
                    if repeat % 2 == 0
                    else ["dbos", "relaystate", "raw"]
                ):
                    store = stores.new(kind, f"fx-{system}-{kind}")
                    ledger = work / f"ledger-{stores.n}.db"
                    (r,) = run_side(
                        system,
                        "effects",
                        "--store",
                        store,
                        "--ledger",
                        str(ledger),
                        "--runs",
                        "20" if args.quick else "50",
                    )
                    results["effects"].append(
                        {"store": kind, "system": system, "repeat": repeat, **r}
                    )
            if kind == "sqlite":
                for system in ("raw", "relaystate", "langgraph"):
                    store = stores.new(kind, f"fsync-{system}")
                    results["fsyncs"].append(
                        {
                            "store": kind,
                            "system": system,
                            "fsyncs_per_turn": fsyncs_per_turn(
                                system, store, 100 if args.quick else 300
                            ),
                        }
                    )
            for system in ("relaystate", "langgraph", "dbos"):
                results["crashes"].append(
                    crash_run(system, kind, stores, work, 2 if args.quick else CRASHES)
                )
        if not args.no_http:
            http_json = work / "http.json"
            cmd = [str(MAIN_PY), str(HERE.parent / "http_limit.py"), "--json", str(http_json)]
            if args.quick:
                cmd.append("--quick")
            subprocess.run(cmd, cwd=ROOT, check=True, timeout=1800, capture_output=True)
            results["http"] = json.loads(http_json.read_text()).get("summary", [])
    took = time.perf_counter() - started
    tables = report(console, results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = "make bench-compare" + (" BENCH_ARGS=--quick" if args.quick else "")
    out = {
        "machine": facts,
        "command": command,
        "repeats": repeats,
        **results,
        "runtime_seconds": took,
    }
    # a quick run checks that everything runs; only a full one replaces the kept results
    path = args.json or (None if args.quick else str(RESULTS / "compare.json"))
    if path is not None:
        Path(path).write_text(json.dumps(out, indent=2, default=str) + "\n")
    if not args.quick:
        charts(results, console)
        write_markdown(tables, facts, command, repeats)
    console.print(f"ran in {took:,.0f} s" + (f"; numbers in {path}" if path else ""))


def crash_run(system: str, kind: str, stores: Stores, work: Path, n: int) -> dict[str, Any]:
    from common import ledger_count

    store = stores.new(kind, f"crash-{system}-{kind}")
    ledger = work / f"crash-ledger-{stores.n}.db"
    done = 0
    for k in range(n):
        order = f"o{k}"
        run_side(
            system,
            "crash",
            "--store",
            store,
            "--ledger",
            str(ledger),
            "--order",
            order,
            check=False,
        )
        rows = run_side(
            system, "recover", "--store", store, "--ledger", str(ledger), "--order", order
        )
        done += bool(rows and rows[-1].get("done"))
    payments = ledger_count(ledger)
    duplicates = sum(max(0, c - 1) for c in payments.values())
    return {
        "store": kind,
        "system": system,
        "killed": n,
        "completed": done,
        "payments": sum(payments.values()),
        "duplicates": duplicates,
    }


def report(
    console: Console, results: dict[str, Any]
) -> list[tuple[str, list[str], list[list[str]]]]:
    """Print the tables; return them (title, header, rows) for BENCHMARKS.md."""
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    grow = results["grow"]
    header = [
        "store",
        "history",
        "system",
        "ms a turn",
        "x raw",
        "bytes a turn",
        "syncs a turn",
        "store size MB",
    ]
    rows = []
    for kind in dict.fromkeys(g["store"] for g in grow):
        for history in sorted({g["history"] for g in grow if g["store"] == kind}):
            raw = [
                g["turn_ms"]
                for g in grow
                if (g["store"], g["history"], g["system"]) == (kind, history, "raw")
            ]
            for system in ("raw", "relaystate", "langgraph"):
                mine = [
                    g
                    for g in grow
                    if (g["store"], g["history"], g["system"]) == (kind, history, system)
                ]
                if not mine:
                    continue
                ms = [g["turn_ms"] for g in mine]
                ratio = statistics.median(ms) / statistics.median(raw) if raw else None
                syncs = [  # SQLite's, from the strace run; PostgreSQL's are not counted
                    f["fsyncs_per_turn"]
                    for f in results["fsyncs"]
                    if (f["store"], f["system"]) == (kind, system)
                    and f["fsyncs_per_turn"] is not None
                ]
                rows.append(
                    [
                        kind,
                        f"{history:,}",
                        system,
                        spread(ms),
                        "" if ratio is None or system == "raw" else f"{ratio:.1f}x",
                        spread([g["bytes_per_turn"] for g in mine], "{:,.0f}"),
                        spread(syncs) if syncs else "-",
                        spread([g["db_bytes"] / 1e6 for g in mine], "{:,.1f}"),
                    ]
                )
    tables.append(("A turn as history grows", header, rows))
    rows = []
    resumes = results["resume"]
    for kind in dict.fromkeys(r["store"] for r in resumes):
        for system in ("relaystate", "langgraph"):
            mine = [r for r in resumes if (r["store"], r["system"]) == (kind, system)]
            for turns in sorted({r["turns"] for r in mine}):
                ms = [r["resume_ms"] for r in mine if r["turns"] == turns]
                rows.append([kind, system, f"{turns:,}", spread(ms)])
    tables.append(
        (
            "Resume in a fresh process (open the store, read the state)",
            ["store", "system", "history", "ms"],
            rows,
        )
    )
    rows = []
    for kind in dict.fromkeys(r["store"] for r in results["effects"]):
        for system in ("raw", "relaystate", "dbos"):
            mine = [r for r in results["effects"] if (r["store"], r["system"]) == (kind, system)]
            if mine:
                rows.append([kind, system, spread([r["workflow_ms"] for r in mine])])
    tables.append(
        (
            "Two durable side effects (pay, ship) a workflow",
            ["store", "system", "ms a workflow"],
            rows,
        )
    )
    rows = [
        [
            c["store"],
            c["system"],
            str(c["killed"]),
            str(c["completed"]),
            str(c["payments"]),
            str(c["duplicates"]),
        ]
        for c in results["crashes"]
    ]
    tables.append(
        (
            "SIGKILL right after the payment, then resume",
            ["store", "system", "killed", "completed", "payments", "duplicate payments"],
            rows,
        )
    )
    if results.get("http"):
        rows = [
            [
                h["store"],
                str(h["clients"]),
                h["system"],
                f"{h['rps_median']:,.0f}",
                "" if h["system"] == "one-insert app" else f"{h['x_one_insert']:.2f}x",
            ]
            for h in results["http"]
        ]
        tables.append(
            (
                "HTTP: served turns against one durable insert a request (wrk)",
                ["store", "clients", "system", "req/s", "x one-insert"],
                rows,
            )
        )
    for title, head, body in tables:
        t = Table(title=title)
        for h in head:
            t.add_column(h, justify="left" if h in ("store", "system") else "right")
        for r in body:
            t.add_row(*r)
        console.print(t)
    return tables


def charts(results: dict[str, Any], console: Console) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        console.print("[yellow]matplotlib is not installed: no charts[/]")
        return
    grow = results["grow"]
    for key, label, name in (
        ("turn_ms", "ms a turn (median)", "turn-ms"),
        ("bytes_per_turn", "bytes written a turn", "bytes"),
        ("db_bytes", "store size (bytes)", "size"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for kind in dict.fromkeys(g["store"] for g in grow):
            for system in ("raw", "relaystate", "langgraph"):
                pts: dict[int, list[float]] = {}
                for g in grow:
                    if (g["store"], g["system"]) == (kind, system) and g.get(key) is not None:
                        pts.setdefault(g["history"], []).append(g[key])
                if pts:
                    xs = sorted(pts)
                    ax.plot(
                        xs,
                        [statistics.median(pts[x]) for x in xs],
                        marker="o",
                        label=f"{system} ({kind})",
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("turns of history")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = RESULTS / f"compare-{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        console.print(f"chart: {path.relative_to(ROOT)}")


def write_markdown(
    tables: list[tuple[str, list[str], list[list[str]]]],
    facts: dict[str, Any],
    command: str,
    repeats: int,
) -> None:
    doc = ROOT / "BENCHMARKS.md"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n\n"
    lines = [
        BEGIN,
        "",
        f"Command: `{command}` ({repeats} alternating repeats; medians, min-max).",
        "",
    ]
    lines.append(
        f"Machine: {facts.get('cpus')} CPUs, {facts.get('platform')}; "
        f"Python {facts.get('python')}, SQLite {facts.get('sqlite')}; "
        f"PostgreSQL {facts.get('postgres_server_version', '-')}."
    )
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in facts["versions"].items()) + ".")
    lines.append("")
    for title, head, body in tables:
        lines += [
            f"#### {title}",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join("---" for _ in head) + "|",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        lines.append("")
    lines += [
        "Charts: `bench/results/compare-turn-ms.png`, `compare-bytes.png`, `compare-size.png`.",
        "",
        END,
    ]
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = (
            text.rstrip() + "\n\n## relaystate, LangGraph and DBOS side by side\n\n" + block + "\n"
        )
    doc.write_text(text)


if __name__ == "__main__":
    main()
