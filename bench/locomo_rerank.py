"""LoCoMo: long-term memory search with a reranker of windows, against the rules alone.

Run: ``python bench/locomo_rerank.py`` (the five dev conversations), ``--quick`` (two),
``--e5 auto|yes|no`` (auto: the e5 window reranker runs when the e5 vectors its questions
need are cached or can be made within ``--e5-budget`` seconds, 600 by default, timed on a
sample first), ``--json PATH`` to keep the numbers. A benchmark, not a test: it prints tables.

Per conversation: a fresh SQLite store, the turns added session by session (as
``bench/locomo.py`` does), hash vectors made, layers built. Every scorable question is
searched (layered hybrid search with the hash embedder, k=20) by the rules alone, then with
:class:`relaystate.memory.rerank.WindowReranker` over the hash embedder and, when it runs,
over e5: the top ``RERANK_DEPTH`` hits scored by their window (the turn and its neighbours),
ordered by the reranker alone or by reciprocal rank fusion of the rule rank and the
reranker rank at a few weights (rules : reranker). Scored as the lab scores: recall_any@k,
recall_all@k (multi-hop questions too), MRR. e5 vectors are kept in ``bench/.cache``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import facts_line, machine_facts, make_console, pct, progress_bar, write_json
from locomo_data import (
    DATA,
    Conversation,
    DiskEmbeddingCache,
    Question,
    items_of,
    load,
    mean_scores,
    score,
    session_time,
)
from rich.console import Console
from rich.table import Table

from relaystate import Scope, open_store
from relaystate.memory import longterm, recall
from relaystate.memory.embed import (
    CachedEmbedder,
    Embedder,
    HashEmbedder,
    InMemoryEmbeddingCache,
    LocalE5Embedder,
    cache_key,
)
from relaystate.memory.longterm import LongTermMemory
from relaystate.memory.rerank import Reranker, WindowReranker
from relaystate.store import Stores

NAMESPACE = "locomo"
K = 20
FUSIONS: dict[str, dict[str, float]] = {
    "alone": {"rules": 0.0, "rerank": 1.0},
    "rrf 1:1": {"rules": 1.0, "rerank": 1.0},
    "rrf 2:1": {"rules": 2.0, "rerank": 1.0},
    "rrf 1:2": {"rules": 1.0, "rerank": 2.0},
}


@dataclass
class Prepared:
    conv: Conversation
    questions: list[Question]
    stores: Stores
    memory: LongTermMemory
    windows: dict[str, str] = field(default_factory=dict)
    """The window text of every turn the rules put in some question's top RERANK_DEPTH."""


@dataclass
class Result:
    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)


def prepare(
    conv: Conversation, questions: list[Question], embedder: Embedder, where: Path
) -> Prepared:
    stores = open_store(f"sqlite:///{where / (conv.cid + '.db')}")
    at = session_time(conv.turns[-1].date)
    memory = LongTermMemory(stores.memories, clock=lambda: at, embedder=embedder)
    scope = Scope.user(conv.cid)
    for part in items_of(conv):
        memory.add(scope, NAMESPACE, part)
    memory.embed_pending(scope, NAMESPACE, batch=64)
    memory.build_layers(scope, NAMESPACE)
    ready = Prepared(conv, questions, stores, memory)
    wanted: set[str] = set()
    depth = max(longterm.RERANK_DEPTH, K)
    for q in questions:
        wanted.update(h.item.id for h in memory.search(scope, NAMESPACE, q.text, k=depth))
    found = memory.memories.get_memories(conv.cid, NAMESPACE + recall.WINDOW, sorted(wanted))
    ready.windows = {w.id: w.text for w in found}
    return ready


@contextmanager
def fusion(weights: dict[str, float]) -> Iterator[None]:
    saved = longterm.RERANK_WEIGHTS
    longterm.RERANK_WEIGHTS = weights
    try:
        yield
    finally:
        longterm.RERANK_WEIGHTS = saved


def run(
    name: str, ready: Sequence[Prepared], reranker: Reranker | None, console: Console
) -> Result:
    result = Result(name)
    with progress_bar(console) as progress:
        bar = progress.add_task(name, total=sum(len(p.questions) for p in ready))
        for p in ready:
            p.memory.reranker = reranker
            scope = Scope.user(p.conv.cid)
            for q in p.questions:
                started = time.perf_counter()
                hits = p.memory.search(scope, NAMESPACE, q.text, k=K)
                result.ms.append((time.perf_counter() - started) * 1000)
                ranked = [h.item.id for h in hits]
                row = {"conv": q.conv, "qid": q.qid, "category": q.category}
                result.rows.append(row | score(ranked, q.evidence))
                progress.advance(bar)
            p.memory.reranker = None
    return result


def e5_embedder(
    ready: Sequence[Prepared], mode: str, budget: float, console: Console
) -> tuple[CachedEmbedder | None, str]:
    """The cached e5 embedder with every vector the runs need made, or None and why not."""
    if mode == "no":
        return None, "not asked for (--e5 no)"
    try:
        model = LocalE5Embedder()
    except Exception as exc:
        return None, f"e5 unavailable: {exc}"
    cache = DiskEmbeddingCache()
    windows = sorted({t for p in ready for t in p.windows.values()})
    queries = sorted({q.text for p in ready for q in p.questions})
    todo_w = [t for t in windows if cache_key(model.name, "document", t) not in cache]
    todo_q = [t for t in queries if cache_key(model.name, "query", t) not in cache]
    estimate = 0.0
    if todo_w or todo_q:
        sample = (todo_w or todo_q)[:16]
        started = time.perf_counter()
        model.embed(sample, kind="document" if todo_w else "query")
        per_text = (time.perf_counter() - started) / len(sample)
        estimate = per_text * len(todo_w) + per_text * 0.3 * len(todo_q)
        console.print(
            f"e5: {len(todo_w):,} of {len(windows):,} windows and {len(todo_q):,} of "
            f"{len(queries):,} queries to embed, about {estimate:.0f} s "
            f"({per_text * 1000:.0f} ms a window)"
        )
    if mode == "auto" and estimate > budget:
        return None, f"skipped: about {estimate:.0f} s of e5 embedding, over --e5-budget {budget:g}"
    embedder = CachedEmbedder(model, cache)
    with progress_bar(console) as progress:
        for kind, texts in (("document", todo_w), ("query", todo_q)):
            bar = progress.add_task(f"e5 {kind}s", total=len(texts))
            for start in range(0, len(texts), 32):
                embedder.embed(texts[start : start + 32], kind=kind)  # type: ignore[arg-type]
                progress.advance(bar, len(texts[start : start + 32]))
    return embedder, f"{len(windows):,} windows, {len(queries):,} queries"


def mh_all10(rows: Sequence[dict[str, Any]]) -> float:
    mh = [r for r in rows if r["category"] == 1]
    return statistics.fmean(r["all@10"] for r in mh) if mh else float("nan")


def render(console: Console, results: Sequence[Result], n: int, convs: int) -> None:
    table = Table(
        title=f"LoCoMo dev, {convs} conversations, {n} questions: layered hybrid search "
        f"(hash embedder), k={K}, reranked depth {longterm.RERANK_DEPTH}",
        title_justify="left",
    )
    table.add_column("setup")
    for head in ("any@1", "any@5", "any@10", "all@10", "multi-hop\nall@10", "MRR", "p50 ms"):
        table.add_column(head, justify="right")
    base = mean_scores(results[0].rows)
    for res in results:
        m = mean_scores(res.rows)
        cells = [m["any@1"], m["any@5"], m["any@10"], m["all@10"], mh_all10(res.rows), m["mrr"]]
        text = [f"{x:.3f}" for x in cells]
        if res is not results[0]:
            delta = m["any@10"] - base["any@10"]
            text[2] += f" ({delta:+.3f})"
        table.add_row(res.name, *text, f"{statistics.median(res.ms):.1f}")
    console.print(table)
    console.print("search p95 ms: " + ", ".join(f"{r.name} {pct(r.ms, 0.95):.1f}" for r in results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two conversations")
    parser.add_argument("--e5", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--e5-budget", type=float, default=600.0, help="seconds (600)")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args(argv)
    console = make_console()
    if not DATA.exists():
        console.print(f"[yellow]LoCoMo not found at {DATA}; set LOCOMO_PATH. Skipped.[/]")
        return 0
    started = time.perf_counter()
    facts = machine_facts()
    console.print(facts_line(facts))
    convs, questions, _ = load()
    if args.quick:
        convs = convs[:2]
    hashing = CachedEmbedder(HashEmbedder(), InMemoryEmbeddingCache(None))
    with tempfile.TemporaryDirectory(prefix="relaystate-rerank-") as tmp:
        ready = []
        with console.status("adding, embedding (hash), building layers"):
            for conv in convs:
                mine = [q for q in questions if q.conv == conv.cid]
                ready.append(prepare(conv, mine, hashing, Path(tmp)))
        n = sum(len(p.questions) for p in ready)
        results = [run("rules (layered, hash)", ready, None, console)]
        rerankers: dict[str, Reranker] = {"hash windows": WindowReranker(hashing)}
        e5, why = e5_embedder(ready, args.e5, args.e5_budget, console)
        console.print(f"e5 window reranker: {why}")
        if e5 is not None:
            rerankers["e5 windows"] = WindowReranker(e5)
        for label, reranker in rerankers.items():
            for fused, weights in FUSIONS.items():
                with fusion(weights):
                    results.append(run(f"+ {label}, {fused}", ready, reranker, console))
        for p in ready:
            p.stores.close()
    render(console, results, n, len(convs))
    took = time.perf_counter() - started
    console.print(f"took {took:.0f} s")
    out = {
        "setups": {r.name: mean_scores(r.rows) | {"mh_all@10": mh_all10(r.rows)} for r in results},
        "conversations": [c.cid for c in convs],
        "e5": why,
    }
    write_json(console, args.json, facts, out, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
