"""``relaystate memory import|search|reindex``: a user's long-term memory from the command
line (also how retrieval is checked from outside: import a conversation, run its questions)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from .options import Options, store_parser

if TYPE_CHECKING:
    from ..memory.embed import Embedder
    from ..memory.longterm import LongTermMemory
    from ..model import MemoryItem
    from ..runtime.runtime import Runtime


def register(commands: Any) -> None:
    memory = commands.add_parser("memory", help="Long-term memory: import items, search them.")
    sub = memory.add_subparsers(title="commands", metavar="COMMAND", parser_class=type(memory))
    memory.set_defaults(run=lambda ns: memory.error("name a memory command"))

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--user", required=True, help="Whose memory.")
    common.add_argument("--namespace", required=True, help="Which of the user's memories.")
    common.add_argument(
        "--embedder",
        help="none (keyword search only), hash, e5 (local, the embed extra) or "
        "openai:MODEL@BASE_URL; default $RELAYSTATE_EMBEDDER, else the best installed "
        "(e5 with the embed extra, else hash; relaystate info says which).",
    )
    p = sub.add_parser(
        "import",
        parents=[store_parser(), common],
        help='Add items from a JSON Lines file: {"id", "text", "time"?, "metadata"?} a line.',
    )
    p.add_argument("file", type=Path, help="The JSON Lines file.")
    p.add_argument(
        "--extractor",
        help="After the import, facts extracted into the memory graph by a chat model: "
        "none or openai:MODEL@BASE_URL (key: $RELAYSTATE_EXTRACTOR_API_KEY); default "
        "$RELAYSTATE_EXTRACTOR, else none.",
    )
    p.set_defaults(run=import_items)

    p = sub.add_parser("search", parents=[store_parser(), common], help="Search the memory.")
    p.add_argument("query", nargs="?", help="What to look for.")
    p.add_argument("--queries", type=Path, help='JSON Lines of {"id", "text"}: one result a line.')
    p.add_argument("--k", type=int, default=10, help="How many hits (10).")
    p.add_argument(
        "--mode", choices=("hybrid", "keyword", "vector"), default="hybrid", help="(hybrid)"
    )
    p.add_argument(
        "--reranker",
        help="none, tei:BASE_URL, cohere:MODEL@BASE_URL, jina:MODEL@BASE_URL or e5-windows "
        "(local, the embed extra); default $RELAYSTATE_RERANKER, else none.",
    )
    p.add_argument(
        "--rewriter",
        help="none or openai:MODEL@BASE_URL (sub-queries from a chat model); default "
        "$RELAYSTATE_REWRITER, else none.",
    )
    p.set_defaults(run=search)

    p = sub.add_parser(
        "reindex",
        parents=[store_parser()],
        help="Rewrite the keyword index of items indexed by an older relaystate (once, after "
        "upgrading from 0.1: their Traditional Chinese is then found by Simplified).",
    )
    p.set_defaults(run=reindex)


def import_items(ns: argparse.Namespace) -> None:
    """Every line is checked before anything is written: a bad file changes nothing."""
    from rich.progress import Progress

    from ..memory.extract import extract_into_graph, extractor_from_config, fact_items
    from ..memory.graph import MemoryGraph
    from ..memory.longterm import checked_items
    from ..scope import Scope

    scope = Scope.user(ns.user)
    items = [_item(line, n, ns.file, ns) for n, line in _lines(ns.file)]
    checked_items(scope, ns.namespace, items)  # all of them before the store is touched
    extractor = extractor_from_config(ns.extractor)  # a bad spec too
    opts = Options.parse(ns)
    facts = None
    with opts.runtime(create=True, templates=False) as rt:
        memory = _memory(rt, ns.embedder)
        graph = None if extractor is None else MemoryGraph(rt.stores.working, clock=rt.clock)
        # a bar on a terminal only: piped, it would leave a blank line in the output
        with Progress(transient=True, disable=opts.as_json or not sys.stdout.isatty()) as bar:
            task = bar.add_task("importing", total=len(items))
            memory.add(scope, ns.namespace, items, progress=lambda n: bar.advance(task, n))
            layers = bar.add_task("conversation layers", total=None)
            built = memory.build_layers(
                scope, ns.namespace, progress=lambda n: bar.advance(layers, n)
            )
            embedded = 0
            if memory.embedder is not None:
                task = bar.add_task(f"embedding ({memory.embedder.name})", total=len(items))
                embedded = memory.embed_pending(
                    scope, ns.namespace, progress=lambda n: bar.advance(task, n)
                )
            if extractor is not None and graph is not None:
                task = bar.add_task("extracting facts", total=len(items))
                facts = extract_into_graph(
                    graph, ns.user, items, extractor, progress=lambda n: bar.advance(task, n)
                )
                # and for search: layered recall credits a matching fact to its turn
                memory.keep_facts(scope, ns.namespace, fact_items(facts, ns.namespace))
        total = memory.count(scope, ns.namespace)
    if opts.as_json:
        done: dict[str, Any] = {
            "imported": len(items),
            "embedded": embedded,
            "layers": built,
            "total": total,
        }
        if facts is not None:
            done["facts"] = {
                "written": facts.written,
                "already": facts.already,
                "refused": facts.refused,
                "failed_batches": facts.failed_batches,
            }
        opts.emit(done)
    else:
        print(
            f"Imported {len(items):,} items into {ns.user}/{ns.namespace} "
            f"({total:,} in all{f', {embedded:,} embedded' if embedded else ''})."
        )
        if facts is not None:
            failed = f", {facts.failed_batches:,} of {facts.batches:,} batches failed"
            print(
                f"Facts: {facts.written:,} written, {facts.already:,} already held, "
                f"{facts.refused:,} refused{failed if facts.failed_batches else ''}."
            )


def search(ns: argparse.Namespace) -> None:
    from ..memory.rerank import reranker_from_config
    from ..memory.rewrite import rewriter_from_config
    from ..scope import Scope

    if (ns.query is None) == (ns.queries is None):
        raise InvalidInput("QUERY", "give a QUERY or --queries FILE (one of them)")
    queries = (
        [(None, ns.query)]
        if ns.queries is None
        else [_query(line, n, ns.queries) for n, line in _lines(ns.queries)]
    )
    reranker = reranker_from_config(ns.reranker)  # a bad spec before the store is opened
    rewriter = rewriter_from_config(ns.rewriter)
    opts = Options.parse(ns)
    scope = Scope.user(ns.user)
    with opts.runtime(create=False, templates=False) as rt:
        memory = _memory(rt, ns.embedder)
        memory.reranker, memory.rewriter = reranker, rewriter
        used = None if memory.embedder is None or ns.mode == "keyword" else memory.embedder.name
        for query_id, text in queries:
            hits = memory.search(scope, ns.namespace, text, k=ns.k, mode=ns.mode)
            found = [
                {"id": h.item.id, "score": round(h.score, 6), "text": h.item.text} for h in hits
            ]
            if ns.queries is not None:
                line = {"query_id": query_id, "hits": found, "embedder": used}
                sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
            elif opts.as_json:
                opts.emit({"query": text, "hits": found, "embedder": used})
            else:
                for n, hit in enumerate(found, start=1):
                    print(f"{n:>3}. [{hit['id']}] {hit['text']}")
                if not found:
                    print("No memory matches.")
                print(f"({'keyword search only' if used is None else 'vectors: ' + used})")


def reindex(ns: argparse.Namespace) -> None:
    """Every user's items, in batches; safe while the store serves (idempotent)."""
    opts = Options.parse(ns)
    with opts.runtime(create=False, templates=False) as rt:
        memories = rt.stores.memories
        done = memories.reindex_words() if memories is not None else 0
    if opts.as_json:
        opts.emit({"reindexed": done})
    else:
        print(f"Reindexed {done:,} items." if done else "Every item's index is up to date.")


def embedder(spec: str | None) -> Embedder | None:
    """The embedder a spec (or ``RELAYSTATE_EMBEDDER``) names; ``none``: keyword search only."""
    from ..memory.embed import ENV_EMBEDDER, embedder_from_config

    chosen = spec if spec is not None else os.environ.get(ENV_EMBEDDER)
    if chosen is not None and chosen.strip().lower() == "none":
        return None
    return embedder_from_config(chosen)


def _memory(rt: Runtime, spec: str | None) -> LongTermMemory:
    from ..memory.longterm import LongTermMemory

    return LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=embedder(spec))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(str(path), f"cannot be read ({exc})") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield n, line


def _json(line: str, n: int, path: Path) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} line {n}", f"not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path} line {n}", "must be a JSON object")
    return value


def _item(line: str, n: int, path: Path, ns: argparse.Namespace) -> MemoryItem:
    """One line as an item (checked again, as any item is, when it is added)."""
    from ..model import MemoryItem

    value, where = _json(line, n, path), f"{path} line {n}"
    unknown = set(value) - {"id", "text", "time", "metadata", "source"}
    if unknown:
        raise InvalidInput(where, f"unknown field {sorted(unknown)[0]!r}")
    for name in ("id", "text"):
        if not isinstance(value.get(name), str) or not value[name].strip():
            raise InvalidInput(where, f"{name!r} must be non-empty text")
    time = None
    if value.get("time") is not None:
        try:
            time = datetime.fromisoformat(str(value["time"]))
        except ValueError:
            raise InvalidInput(where, "'time' is not an ISO 8601 time") from None
    metadata = value.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput(where, "'metadata' must be an object")
    source = value.get("source")
    if source is not None and not isinstance(source, str):
        raise InvalidInput(where, "'source' must be text")
    return MemoryItem(
        value["id"], ns.user, ns.namespace, value["text"], time, source, None, metadata
    )


def _query(line: str, n: int, path: Path) -> tuple[str, str]:
    value = _json(line, n, path)
    if not isinstance(value.get("id"), str) or not isinstance(value.get("text"), str):
        raise InvalidInput(
            f"{path} line {n}",
            'a query line is {"id": "q1", "text": "where do I live?"} (both text; '
            f"this one has {', '.join(sorted(value)) or 'no fields'})",
        )
    return value["id"], value["text"]
