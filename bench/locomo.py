"""LoCoMo retrieval through relaystate's public long-term memory API (issue 11).

Run: ``python bench/locomo.py`` (the five dev conversations; keyword, vector and hybrid search
with the local e5 model, vector and hybrid with the hash embedder), ``--quick`` (two
conversations; the hash embedder only, unless the e5 cache already holds every vector they
need), ``--cli`` (also import one conversation and run its questions through ``relaystate
memory import|search`` as processes, and check the rankings equal the in-process ones: how
outsiders check these figures), ``--json PATH`` to keep the numbers. A benchmark, not a test:
it prints tables and asserts nothing about quality; ``--cli`` exits 1 when the command line
ranks differently from the library.

What it does, per conversation: a fresh SQLite store in a temporary directory, a ``Runtime``
with no templates, ``LongTermMemory`` over its memories; user = the conversation id,
namespace ``locomo``. Each session's turns go in with one ``add`` call (in conversation
order; an item per turn: id = the normalised ``dia_id``, text = ``speaker: text`` plus
`` [image: caption]``, time = the session's date, metadata = session number and speaker),
then ``embed_pending`` per embedder, then ``build_layers`` when the product has it (the
layered conversation search; without it, search is plain turn search). Every scorable
question (category 5, adversarial, left out; evidence normalised as the lab did) is searched
with k=20 and scored: recall_any@k and recall_all@k (k = 1, 5, 10, 20), MRR and NDCG@10.

Latency is warm: each setup first answers a few questions untimed, and query vectors are in
the embedding cache before timing, so search latency excludes the query's embedding, which
is timed apart with the bare model. "Evidence in context": the top 200 hybrid hits become
long-term candidates of ``relaystate.memory.context.build`` (score by rank) at 1k, 2k, 4k and
8k tokens (the default counter); a question counts when its evidence turns' texts (all / any)
are inside the prompt.

Vectors of e5 are cached under ``bench/.cache`` (gitignored), seeded from the lab's cache in
``bench/locomo_lab/.cache`` when present (same engine, identical vectors).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchlib import ROOT, facts_line, machine_facts, make_console, pct, progress_bar, write_json
from locomo_data import (
    CATS,
    DATA,
    KS,
    Conversation,
    DiskEmbeddingCache,
    LoadStats,
    Question,
    items_of,
    load,
    mean_scores,
    score,
    seed_from_lab,
)
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.memory.context import Candidate, build
from relaystate.memory.embed import (
    CachedEmbedder,
    Embedder,
    HashEmbedder,
    InMemoryEmbeddingCache,
    LocalE5Embedder,
    cache_key,
)
from relaystate.memory.longterm import LongTermMemory, Mode
from relaystate.memory.tokens import TokenCounter, default_counter

NAMESPACE = "locomo"
K = 20
CONTEXT_K = 200
"""Hits a context is built from: enough that the budget, not k, decides what fits."""
BUDGETS = (1000, 2000, 4000, 8000)
WARMUP = 5
"""Untimed searches per setup and conversation before the timed pass."""
QUERY_EMBED_SAMPLE = 200
"""Questions whose query embedding is timed with the bare model (uncached), per embedder."""

# The baseline (pure-Python BM25 over single turns, all ten conversations) and targets.
BASELINE = {"any@10": 0.627, "all@10": 0.521, "mh_all@10": 0.110}
TARGET = {"any@10": 0.80, "mh_all@10": 0.35}


@dataclass(frozen=True)
class Setup:
    """One way of searching: a mode with the vectors of one embedder."""

    name: str
    mode: Mode
    embedder: str
    """``e5`` or ``hash``: whose vectors (and query vectors) the memory uses."""


@dataclass
class Ingest:
    conv: str
    turns: int
    sessions: int
    add_s: float
    embed_s: dict[str, float] = field(default_factory=dict)
    layers_s: dict[str, float] = field(default_factory=dict)
    layer_docs: dict[str, int] = field(default_factory=dict)


@dataclass
class Result:
    """Scores and timings of all questions under one setup."""

    setup: str
    per_question: list[dict[str, Any]] = field(default_factory=list)
    search_ns: list[int] = field(default_factory=list)


# -- the embedders -----------------------------------------------------------------------------
def embedders(use_e5: bool, cache: DiskEmbeddingCache | None) -> dict[str, CachedEmbedder]:
    """Hash always; e5 behind the on-disk cache when asked. Both cached, so that warm search
    never embeds a query it has seen (its embedding is timed apart)."""
    out = {"hash": CachedEmbedder(HashEmbedder(), InMemoryEmbeddingCache(None))}
    if use_e5:
        out["e5"] = CachedEmbedder(LocalE5Embedder(), cache)
    return out


def e5_is_warm(convs: Sequence[Conversation], questions: Sequence[Question]) -> bool:
    """Whether the cache (after seeding from the lab) holds every vector these need."""
    try:
        e5 = LocalE5Embedder()
    except Exception:
        return False
    cache = DiskEmbeddingCache()
    try:
        docs = [t.body for c in convs for t in c.turns]
        queries = [q.text for q in questions]
        seed_from_lab(cache, e5.name, docs, queries)
        keys = [cache_key(e5.name, "document", d) for d in docs]
        keys += [cache_key(e5.name, "query", q) for q in queries]
        return all(k in cache for k in keys)
    finally:
        cache.close()


def setups(names: Sequence[str]) -> list[Setup]:
    out = []
    if "e5" in names:
        out += [
            Setup("keyword", "keyword", "e5"),
            Setup("vector e5", "vector", "e5"),
            Setup("hybrid e5", "hybrid", "e5"),
        ]
    else:
        out.append(Setup("keyword", "keyword", "hash"))
    out += [Setup("vector hash", "vector", "hash"), Setup("hybrid hash", "hybrid", "hash")]
    return out


# -- one conversation --------------------------------------------------------------------------
def ingest(
    conv: Conversation,
    memories: dict[str, LongTermMemory],
    console: Console,
) -> Ingest:
    """Add the conversation session by session, embed it for every embedder, build layers."""
    scope = Scope.user(conv.cid)
    sessions = items_of(conv)
    first = next(iter(memories.values()))
    facts = Ingest(conv.cid, len(conv.turns), len(sessions), 0.0)
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{conv.cid}: adding turns", total=len(conv.turns))
        started = time.perf_counter()
        for part in sessions:
            first.add(scope, NAMESPACE, part, progress=lambda n: progress.advance(bar, n))
        facts.add_s = time.perf_counter() - started
        for name, memory in memories.items():
            bar = progress.add_task(f"{conv.cid}: embedding ({name})", total=len(conv.turns))
            started = time.perf_counter()
            memory.embed_pending(
                scope, NAMESPACE, batch=64, progress=partial(progress.advance, bar)
            )
            facts.embed_s[name] = time.perf_counter() - started
    for name, memory in memories.items():
        if hasattr(memory, "build_layers"):
            started = time.perf_counter()
            facts.layer_docs[name] = int(memory.build_layers(scope, NAMESPACE))
            facts.layers_s[name] = time.perf_counter() - started
    return facts


def search_all(
    conv: Conversation,
    questions: Sequence[Question],
    memories: dict[str, LongTermMemory],
    plan: Sequence[Setup],
    results: dict[str, Result],
    console: Console,
) -> None:
    scope = Scope.user(conv.cid)
    with progress_bar(console) as progress:
        for s in plan:
            memory = memories[s.embedder]
            bar = progress.add_task(f"{conv.cid}: {s.name}", total=len(questions))
            for q in questions[:WARMUP]:
                memory.search(scope, NAMESPACE, q.text, k=K, mode=s.mode)
            for q in questions:
                started = time.perf_counter_ns()
                hits = memory.search(scope, NAMESPACE, q.text, k=K, mode=s.mode)
                results[s.name].search_ns.append(time.perf_counter_ns() - started)
                ranked = [h.item.id for h in hits]
                results[s.name].per_question.append(
                    {"conv": q.conv, "qid": q.qid, "category": q.category, "ranked": ranked}
                    | score(ranked, q.evidence)
                )
                progress.advance(bar)


def in_context(
    conv: Conversation,
    questions: Sequence[Question],
    memory: LongTermMemory,
    counter: TokenCounter,
    console: Console,
) -> list[dict[str, Any]]:
    """Per question and budget: are the evidence turns' texts inside the built prompt?"""
    scope = Scope.user(conv.cid)
    text_of = {t.dia_id: t.body for t in conv.turns}
    rows = []
    with progress_bar(console) as progress:
        bar = progress.add_task(f"{conv.cid}: contexts", total=len(questions))
        for q in questions:
            hits = memory.search(scope, NAMESPACE, q.text, k=CONTEXT_K, mode="hybrid")
            candidates = [
                Candidate(f"turn:{h.item.id}", "longterm", h.item.text, 1.0 / (1 + rank))
                for rank, h in enumerate(hits)
            ]
            for budget in BUDGETS:
                started = time.perf_counter_ns()
                ctx = build(candidates, budget=budget, counter=counter)
                took = time.perf_counter_ns() - started
                inside = [text_of[e].strip() in ctx.prompt for e in q.evidence]
                rows.append(
                    {
                        "conv": q.conv,
                        "qid": q.qid,
                        "category": q.category,
                        "budget": budget,
                        "all": float(all(inside)),
                        "any": float(any(inside)),
                        "tokens": ctx.tokens,
                        "kept": len(ctx.kept),
                        "hits": len(hits),
                        "build_ns": took,
                    }
                )
            progress.advance(bar)
    return rows


# -- the command line, as outsiders run it ------------------------------------------------------
def cli_check(
    conv: Conversation,
    questions: Sequence[Question],
    embedder_name: str,
    console: Console,
    workdir: Path,
) -> dict[str, Any]:
    """Import ``conv`` and run its questions with ``python -m relaystate.cli memory``, then the
    same in this process on a fresh store; the rankings must be equal."""
    where = workdir / "cli"
    where.mkdir()
    items = [i for part in items_of(conv) for i in part]
    file = where / "items.jsonl"
    file.write_text(
        "".join(
            json.dumps(
                {
                    "id": i.id,
                    "text": i.text,
                    "time": i.time.isoformat() if i.time else None,
                    "metadata": i.metadata,
                }
            )
            + "\n"
            for i in items
        )
    )
    qfile = where / "queries.jsonl"
    qfile.write_text(
        "".join(json.dumps({"id": str(q.qid), "text": q.text}) + "\n" for q in questions)
    )
    store = f"sqlite:///{where / 'cli.db'}"
    base = [sys.executable, "-m", "relaystate.cli", "memory"]
    who = ["--store", store, "--user", conv.cid, "--namespace", NAMESPACE]
    who += ["--embedder", embedder_name]
    timings: dict[str, float] = {}
    with console.status(f"CLI: memory import ({conv.cid}, --embedder {embedder_name})"):
        started = time.perf_counter()
        done = subprocess.run(
            [*base, "import", str(file), *who, "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        timings["import_s"] = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"memory import failed ({done.returncode}): {done.stderr[-2000:]}")
    imported = json.loads(done.stdout)
    cli_ranked: dict[str, dict[str, list[str]]] = {}
    modes: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
    for mode in modes:
        asked = ["--queries", str(qfile), "--k", str(K), "--mode", mode, "--json"]
        with console.status(f"CLI: memory search --queries ({mode})"):
            started = time.perf_counter()
            done = subprocess.run(
                [*base, "search", *who, *asked],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
            )
            timings[f"search_{mode}_s"] = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"memory search failed ({done.returncode}): {done.stderr[-2000:]}")
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        cli_ranked[mode] = {ln["query_id"]: [h["id"] for h in ln["hits"]] for ln in lines}

    # the same in this process, on a fresh store, items added as the CLI adds them (one call)
    inner: Embedder = LocalE5Embedder() if embedder_name == "e5" else HashEmbedder()
    rt = Runtime(open_store(f"sqlite:///{where / 'lib.db'}"), [])
    try:
        memory = LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=inner)
        scope = Scope.user(conv.cid)
        with console.status("in-process: the same import and searches"):
            memory.add(scope, NAMESPACE, items)
            memory.embed_pending(scope, NAMESPACE)
            if hasattr(memory, "build_layers"):
                memory.build_layers(scope, NAMESPACE)
            lib_ranked = {
                mode: {
                    str(q.qid): [
                        h.item.id for h in memory.search(scope, NAMESPACE, q.text, k=K, mode=mode)
                    ]
                    for q in questions
                }
                for mode in modes
            }
    finally:
        rt.close()
    out: dict[str, Any] = {
        "conv": conv.cid,
        "embedder": embedder_name,
        "imported": imported,
        "timings": timings,
        "modes": {},
    }
    for mode in modes:
        same = sum(
            cli_ranked[mode].get(str(q.qid)) == lib_ranked[mode][str(q.qid)] for q in questions
        )
        cli_scores = mean_scores(
            [score(cli_ranked[mode].get(str(q.qid), []), q.evidence) for q in questions]
        )
        lib_scores = mean_scores(
            [score(lib_ranked[mode][str(q.qid)], q.evidence) for q in questions]
        )
        out["modes"][mode] = {
            "questions": len(questions),
            "same_ranking": same,
            "cli": cli_scores,
            "library": lib_scores,
        }
    return out


# -- tables ------------------------------------------------------------------------------------
def f3(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"


def judged(value: float, target: float) -> str:
    colour = "green" if value >= target else "red"
    return f"[{colour}]{value:.3f}[/{colour}]"


def mh_all10(rows: Sequence[dict[str, Any]]) -> float:
    mh = [r for r in rows if r["category"] == 1]
    return mean_scores(mh)["all@10"]


def render_overall(console: Console, results: dict[str, Result], n_questions: int) -> None:
    table = Table(
        title=f"LoCoMo retrieval, all {n_questions} scored questions", title_justify="left"
    )
    table.add_column("setup")
    heads = [*(f"any@{k}" for k in KS), *(f"all@{k}" for k in KS), "MRR", "NDCG@10"]
    heads.append("multi-hop\nall@10")
    for h in heads:
        table.add_column(h, justify="right")
    for name, res in results.items():
        m = mean_scores(res.per_question)
        cells = [f3(m[f"any@{k}"]) for k in KS] + [f3(m[f"all@{k}"]) for k in KS]
        cells[2] = judged(m["any@10"], TARGET["any@10"])
        cells += [f3(m["mrr"]), f3(m["ndcg@10"])]
        cells.append(judged(mh_all10(res.per_question), TARGET["mh_all@10"]))
        table.add_row(name, *cells)
    table.add_section()
    blank = [""] * len(heads)
    base = list(blank)
    base[2], base[6], base[-1] = (f"{BASELINE[k]:.3f}" for k in ("any@10", "all@10", "mh_all@10"))
    table.add_row("[dim]BM25 baseline (issue; 10 conversations)[/]", *base)
    goal = list(blank)
    goal[2], goal[-1] = f"≥ {TARGET['any@10']:.2f}", f"≥ {TARGET['mh_all@10']:.2f}"
    table.add_row("[dim]target[/]", *goal)
    console.print(table)


def render_categories(console: Console, results: dict[str, Result]) -> None:
    table = Table(title="Per category (n = questions)", title_justify="left")
    table.add_column("setup")
    table.add_column("category")
    table.add_column("n", justify="right")
    for h in [*(f"any@{k}" for k in KS), *(f"all@{k}" for k in KS), "MRR", "NDCG@10"]:
        table.add_column(h, justify="right")
    for name, res in results.items():
        for cat, label in CATS.items():
            rows = [r for r in res.per_question if r["category"] == cat]
            m = mean_scores(rows)
            cells = [f3(m[f"any@{k}"]) for k in KS] + [f3(m[f"all@{k}"]) for k in KS]
            cells += [f3(m["mrr"]), f3(m["ndcg@10"])]
            table.add_row(name, label, str(len(rows)), *cells)
        table.add_section()
    console.print(table)


def render_spread(console: Console, results: dict[str, Result], convs: Sequence[str]) -> None:
    table = Table(
        title="Per conversation: recall_any@10 / multi-hop recall_all@10", title_justify="left"
    )
    table.add_column("setup")
    for c in convs:
        table.add_column(c, justify="right")
    table.add_column("min-max any@10", justify="right")
    table.add_column("sd any@10", justify="right")
    table.add_column("min-max mh all@10", justify="right")
    for name, res in results.items():
        anys, mhs = [], []
        cells = []
        for c in convs:
            rows = [r for r in res.per_question if r["conv"] == c]
            a, mh = mean_scores(rows)["any@10"], mh_all10(rows)
            anys.append(a)
            mhs.append(mh)
            n_mh = sum(r["category"] == 1 for r in rows)
            cells.append(f"{a:.3f} / {f3(mh)} ({n_mh})")
        sd = statistics.pstdev(anys) if len(anys) > 1 else 0.0
        ok_mh = [x for x in mhs if x == x]
        cells += [f"{min(anys):.3f}-{max(anys):.3f}", f"{sd:.3f}"]
        cells.append(f"{min(ok_mh):.3f}-{max(ok_mh):.3f}" if ok_mh else "—")
        table.add_row(name, *cells)
    console.print(table)
    console.print("(n) = multi-hop questions of the conversation")


def render_latency(
    console: Console,
    results: dict[str, Result],
    plan: Sequence[Setup],
    embed_ms: dict[str, list[float]],
) -> None:
    table = Table(title="Warm retrieval latency (k=20), per question", title_justify="left")
    table.add_column("setup")
    for h in (
        "searches",
        "search p50 ms",
        "search p95 ms",
        "search p99 ms",
        "query embedding\np50 ms",
        "query embedding\np95 ms",
    ):
        table.add_column(h, justify="right")
    for s in plan:
        ms = [x / 1e6 for x in results[s.name].search_ns]
        emb = embed_ms.get(s.embedder, []) if s.mode != "keyword" else []
        table.add_row(
            s.name,
            f"{len(ms):,}",
            f"{statistics.median(ms):.2f}",
            f"{pct(ms, 0.95):.2f}",
            f"{pct(ms, 0.99):.2f}",
            f"{statistics.median(emb):.2f}" if emb else "—",
            f"{pct(emb, 0.95):.2f}" if emb else "—",
        )
    console.print(table)


def render_context(
    console: Console, rows: Sequence[dict[str, Any]], setup: str, counter: str
) -> None:
    table = Table(
        title=f"Evidence in context: top {CONTEXT_K} {setup} hits -> context.build "
        f"(counter {counter})",
        title_justify="left",
    )
    table.add_column("budget", justify="right")
    for h in (
        "questions",
        "all evidence\nin prompt",
        "any evidence\nin prompt",
        "multi-hop all",
        "turns kept\n(mean)",
        "tokens\n(mean)",
        "build p50 ms",
        "build p95 ms",
    ):
        table.add_column(h, justify="right")
    for budget in BUDGETS:
        mine = [r for r in rows if r["budget"] == budget]
        mh = [r for r in mine if r["category"] == 1]
        ms = [r["build_ns"] / 1e6 for r in mine]
        table.add_row(
            f"{budget:,}",
            f"{len(mine):,}",
            f3(statistics.fmean(r["all"] for r in mine)),
            f3(statistics.fmean(r["any"] for r in mine)),
            f3(statistics.fmean(r["all"] for r in mh)) if mh else "—",
            f"{statistics.fmean(r['kept'] for r in mine):.1f}",
            f"{statistics.fmean(r['tokens'] for r in mine):,.0f}",
            f"{statistics.median(ms):.2f}",
            f"{pct(ms, 0.95):.2f}",
        )
    console.print(table)


def render_ingest(console: Console, facts: Sequence[Ingest]) -> None:
    table = Table(title="Ingest per conversation", title_justify="left")
    table.add_column("conversation")
    table.add_column("turns", justify="right")
    table.add_column("sessions\n(add calls)", justify="right")
    table.add_column("add s", justify="right")
    names = sorted({n for f in facts for n in f.embed_s})
    for n in names:
        table.add_column(f"embed {n} s", justify="right")
    layered = any(f.layers_s for f in facts)
    if layered:
        for n in names:
            table.add_column(f"build_layers\n({n}) s / docs", justify="right")
    for f in facts:
        cells = [f.conv, f"{f.turns:,}", str(f.sessions), f"{f.add_s:.2f}"]
        cells += [f"{f.embed_s.get(n, 0):.2f}" for n in names]
        if layered:
            cells += [f"{f.layers_s.get(n, 0):.2f} / {f.layer_docs.get(n, 0):,}" for n in names]
        table.add_row(*cells)
    console.print(table)


def render_cli(console: Console, check: dict[str, Any]) -> bool:
    table = Table(
        title=f"relaystate memory import|search as processes vs in-process ({check['conv']}, "
        f"--embedder {check['embedder']})",
        title_justify="left",
    )
    table.add_column("mode")
    for h in (
        "questions",
        "same ranking",
        "any@10 CLI",
        "any@10 library",
        "MRR CLI",
        "MRR library",
        "verdict",
    ):
        table.add_column(h, justify="right")
    ok = True
    for mode, m in check["modes"].items():
        equal = m["same_ranking"] == m["questions"]
        ok &= equal
        table.add_row(
            mode,
            str(m["questions"]),
            str(m["same_ranking"]),
            f3(m["cli"]["any@10"]),
            f3(m["library"]["any@10"]),
            f3(m["cli"]["mrr"]),
            f3(m["library"]["mrr"]),
            "[green]equal[/]" if equal else "[red]DIFFERENT[/]",
        )
    console.print(table)
    t = check["timings"]
    console.print(
        "CLI process times: "
        + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in t.items())
        + f"; import said {check['imported']}"
    )
    return ok


# -- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 conversations, hash unless e5 is cached"
    )
    parser.add_argument("--conversations", type=int, help="how many conversations (default all)")
    parser.add_argument("--no-e5", action="store_true", help="the hash embedder only")
    parser.add_argument("--cli", action="store_true", help="also check the CLI on one conversation")
    parser.add_argument(
        "--cli-embedder", choices=("hash", "e5"), default="hash", help="embedder of --cli (hash)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    console = make_console(190)
    if not DATA.exists():
        console.print(f"[yellow]LoCoMo not found at {DATA} (LOCOMO_PATH): skipped[/]")
        return 0
    started = time.perf_counter()
    convs, questions, stats = load(DATA)
    count = args.conversations or (2 if args.quick else len(convs))
    convs = convs[:count]
    chosen = {c.cid for c in convs}
    questions = [q for q in questions if q.conv in chosen]
    facts = machine_facts()
    console.print(facts_line(facts))
    print_stats(console, stats, len(questions), [c.cid for c in convs])

    use_e5 = not args.no_e5 and (not args.quick or e5_is_warm(convs, questions))
    if args.quick and not use_e5 and not args.no_e5:
        console.print("[yellow]--quick: the e5 cache is cold for these conversations: hash only[/]")
    cache = DiskEmbeddingCache() if use_e5 else None
    models = embedders(use_e5, cache)
    if cache is not None:
        seeded = seed_from_lab(
            cache,
            models["e5"].name,
            [t.body for c in convs for t in c.turns],
            [q.text for q in questions],
        )
        console.print(
            f"e5 cache {cache.path}: {len(cache):,} vectors ({seeded:,} copied from the lab's)"
        )
    plan = setups(list(models))
    has_layers = hasattr(LongTermMemory, "build_layers")
    layered = "present: layered search" if has_layers else "absent: plain turn search"
    console.print(f"LongTermMemory.build_layers: {layered}")
    counter = default_counter()
    context_setup = "hybrid e5" if "e5" in models else "hybrid hash"
    context_embedder = "e5" if "e5" in models else "hash"

    # query embedding: the bare model on a sample, then every query into the cache
    embed_ms: dict[str, list[float]] = {}
    for name, model in models.items():
        inner = model.inner
        sample = questions[:: max(1, len(questions) // QUERY_EMBED_SAMPLE)][:QUERY_EMBED_SAMPLE]
        inner.embed(["warm up"], kind="query")
        samples = []
        for q in sample:
            t0 = time.perf_counter_ns()
            inner.embed([q.text], kind="query")
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        embed_ms[name] = samples
        with console.status(f"query vectors ({name})"):
            model.embed([q.text for q in questions], kind="query")

    results = {s.name: Result(s.name) for s in plan}
    ingests: list[Ingest] = []
    context_rows: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-locomo-"))
    cli: dict[str, Any] | None = None
    try:
        for conv in convs:
            mine = [q for q in questions if q.conv == conv.cid]
            rt = Runtime(open_store(f"sqlite:///{workdir / (conv.cid + '.db')}"), [])
            try:
                memories = {
                    name: LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=model)
                    for name, model in models.items()
                }
                ingests.append(ingest(conv, memories, console))
                search_all(conv, mine, memories, plan, results, console)
                context_rows += in_context(conv, mine, memories[context_embedder], counter, console)
            finally:
                rt.close()
        if args.cli:
            conv = convs[0]
            mine = [q for q in questions if q.conv == conv.cid]
            cli = cli_check(conv, mine, args.cli_embedder, console, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if cache is not None:
            cache.close()
    took = time.perf_counter() - started

    render_ingest(console, ingests)
    render_overall(console, results, len(questions))
    render_categories(console, results)
    render_spread(console, results, [c.cid for c in convs])
    render_latency(console, results, plan, embed_ms)
    render_context(console, context_rows, context_setup, counter.name)
    ok = True
    if cli is not None:
        ok = render_cli(console, cli)
    console.print(
        f"Baseline and targets are the issue's: BM25 over single turns on all ten LoCoMo "
        f"conversations; these figures are on the {len(convs)} dev conversation(s) read from "
        f"{DATA}. Search latency excludes the query's embedding (cached before timing); query "
        f"embedding is the bare model on {len(next(iter(embed_ms.values())))} questions."
    )
    console.print(f"ran in {took:.1f} s")
    out = {
        "conversations": [c.cid for c in convs],
        "build_layers": has_layers,
        "ingest": [asdict(f) for f in ingests],
        "overall": {
            n: mean_scores(r.per_question) | {"mh_all@10": mh_all10(r.per_question)}
            for n, r in results.items()
        },
        "per_category": {
            n: {
                CATS[c]: mean_scores([q for q in r.per_question if q["category"] == c])
                for c in CATS
            }
            for n, r in results.items()
        },
        "latency_ms": {
            n: {"p50": statistics.median(r.search_ns) / 1e6, "p95": pct(r.search_ns, 0.95) / 1e6}
            for n, r in results.items()
        },
        "query_embedding_ms": {
            n: {"p50": statistics.median(v), "p95": pct(v, 0.95)} for n, v in embed_ms.items()
        },
        "context": context_rows,
        "cli": cli,
    }
    write_json(console, args.json, facts, out, took)
    return 0 if ok else 1


def print_stats(console: Console, stats: LoadStats, n: int, convs: Sequence[str]) -> None:
    fixed = ", ".join(f"{c} {a}->{b}" for c, a, b in stats.fixed_ids) or "none"
    dropped = ", ".join(f"{c} {a!r}" for c, a in stats.dropped_ids) or "none"
    console.print(
        f"LoCoMo {DATA.name}: conversations {', '.join(convs)}; {n} questions scored "
        f"(all five: {stats.adversarial} adversarial left out, {stats.skipped_no_evidence} "
        f"without usable evidence skipped; evidence ids fixed: {fixed}; dropped: {dropped})"
    )


if __name__ == "__main__":
    sys.exit(main())
