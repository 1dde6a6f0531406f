"""Updates: does a task's context show the current value of something the user changed long
ago, and never the replaced value as the current one? (issue 11's "Updates" probe)

Run: ``python bench/memory_updates.py`` (8 probes per attribute kind, 50-300 filler turns
before each change), ``--quick`` (2 probes per kind, 50-80 filler turns), ``--seed N``,
``--json PATH``. A benchmark, not a test: it prints tables and asserts nothing.

Each probe is one long conversation through the real turn path: ``Conversation(runtime,
memory=Recorder(MemoryLayers.of(runtime)))`` over the demo agents on a SQLite file, one user
per probe. It books a flight (origin, destination, date, cabin class, passenger name, all
understood by the rule engine), then the attribute under test is changed 1-3 times, each
change 50-300 filler turns (chit-chat the engine does not understand, so the task just asks
for confirmation again) after the previous value was said:

- slot kinds (destination, origin, date, cabin class, passenger name: the name's spelling)
  change through a user turn the engine must understand ("change the date to Dec 12");
- note kinds (seat, diet, budget, home city, hotel, meal, room, rental car, allergy,
  e-mail, bags) are said in a turn and recorded with ``TaskMemory.note`` (explicit updates,
  no model), the turn as the source; two other noted attributes stay unchanged around them.

Values, phrasings (several per kind), filler (~40 templates over word lists) and gaps are
drawn from ``random.Random(seed)``: the same seed, the same conversations.

The task's context is built with ``task_context(layers, state, budget=B)`` at B = 1k, 2k, 4k
tokens (default counter) at three points: right after the last change (the query is the
change itself, the default: the latest user turn); after 20 more filler turns (the change is
out of the recent window); and then with the query asking about the attribute.

Checks, exactly (``current`` = the value the task holds after the last change: the slot's
value for slot kinds, the last noted value for note kinds; ``replaced`` = every earlier value
of the attribute that differs from it):

- **entity line**: a prompt line starting with ``"<attribute>: "``; its value is what follows,
  up to ``" (changed from "`` when present;
- **current present**: some entity line's value equals ``current`` (target 100%);
- **stale as current**: some entity line's value equals a replaced value, or (slot kinds) the
  task state line's ``filled:`` list holds ``<attribute>=<replaced value>`` (target 0%);
- **stale mentioned elsewhere** (reported, no target): a replaced value (dates also as "12
  December 2026") appears anywhere else in the prompt, e.g. an older turn or a summary of
  the agent's confirmations: history that a model could still misread.

Also counted: changes the engine did not apply as intended (the slot then holds something
else, and ``current`` is what it holds), changes that moved another slot (collateral), and
filler turns that touched the task (a slot, the stage or another task): each would make the
probe measure something else, so they are reported.
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
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from benchlib import facts_line, machine_facts, make_console, pct, progress_bar, write_json
from rich.console import Console
from rich.table import Table

NOW = "2026-11-29T10:00:00"
"""The conversation clock, as in the tests: every date below is ahead of it."""
os.environ.setdefault("RELAYSTATE_NOW", NOW)

from relaystate import Runtime, Scope, open_store  # noqa: E402
from relaystate.conversation import Conversation  # noqa: E402
from relaystate.conversation.engine import Turn  # noqa: E402
from relaystate.demo import templates  # noqa: E402
from relaystate.memory.assemble import task_context  # noqa: E402
from relaystate.memory.recorder import MemoryLayers, Recorder, turn_id  # noqa: E402
from relaystate.memory.tokens import TokenCounter, default_counter  # noqa: E402
from relaystate.model import TaskState  # noqa: E402

BUDGETS = (1000, 2000, 4000)
POINTS = ("after change", "+20 turns", "+20, asked")
TRAILING = 20

# -- word lists ---------------------------------------------------------------------------------


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


CITIES = words(
    "Tokyo Osaka Paris London Berlin Rome Madrid Lisbon Vienna Prague Amsterdam Dublin "
    "Shanghai Beijing Chengdu Hangzhou Shenzhen Guangzhou Singapore Bangkok Sydney Melbourne "
    "Toronto Vancouver Chicago Boston Seattle Denver Dubai Istanbul Athens Oslo Stockholm "
    "Helsinki Copenhagen Warsaw Budapest Seoul Manila Jakarta"
)
FIRST = words(
    "Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Leo Maria Nina Oscar "
    "Paula Quinn Rosa Sam Tina Victor Wendy Yuki Zoe Li Wei Mei Arjun Priya Omar"
)
LAST = words(
    "Wang Li Zhang Chen Smith Jones Garcia Miller Davis Lopez Wilson Taylor Brown Martin "
    "Lee Kim Park Nguyen Silva Rossi Muller Novak Kowalski Tanaka Sato Khan Patel Okafor"
)
# a name and a near-spelling of it: the "name spelling" change
RESPELL = {
    "Alice": "Alyce",
    "Carol": "Carole",
    "Karen": "Karin",
    "Irene": "Irena",
    "Nina": "Nena",
    "Zoe": "Zoey",
    "Wang": "Wong",
    "Smith": "Smyth",
    "Lee": "Li",
    "Chen": "Chan",
    "Muller": "Mueller",
    "Jones": "Johns",
    "Davis": "Davies",
    "Silva": "Sylva",
}
MONTHS = "January February March April May June July August September October November December"
MONTH_NAMES = MONTHS.split()


def respelled(name: str, rng: random.Random) -> str:
    """The same person's name spelled another way (a first or last name changed)."""
    parts = name.split()
    spots = [i for i, p in enumerate(parts) if p in RESPELL]
    if not spots:
        return f"{rng.choice(FIRST)} {parts[-1]}"
    i = rng.choice(spots)
    parts[i] = RESPELL[parts[i]]
    return " ".join(parts)


def a_name(rng: random.Random) -> str:
    return f"{rng.choice([*(f for f in FIRST if f in RESPELL), *FIRST])} {rng.choice(LAST)}"


def a_date(rng: random.Random) -> date:
    return date(2026, 12, 1) + timedelta(days=rng.randrange(0, 80))


def spoken_date(d: date, rng: random.Random) -> str:
    month = MONTH_NAMES[d.month - 1]
    return rng.choice([f"{month[:3]} {d.day}", f"{month} {d.day}", d.isoformat()])


def long_date(d: date) -> str:
    return f"{d.day} {MONTH_NAMES[d.month - 1]} {d.year}"


# -- attribute kinds ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """An attribute the user states and changes: its phrasings and how values are drawn."""

    name: str
    attribute: str
    """The slot or noted entity's name (what the entity line starts with)."""
    via: str
    """``slot`` (changed by a turn the engine understands) or ``note`` (TaskMemory.note)."""
    draw: Callable[[random.Random], str]
    say: tuple[str, ...]
    """How the first value is said (note kinds); ``{v}`` is the value."""
    change: tuple[str, ...]
    """How a change is said; ``{v}`` is the new value as spoken."""
    ask: tuple[str, ...]
    """A question about the attribute (the third point's query)."""
    next_value: Callable[[str, random.Random], str] | None = None
    """The changed value from the old one (default: another draw)."""


def pick(values: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(list(values))


def money(rng: random.Random) -> str:
    return f"{rng.randrange(3, 40) * 50} dollars"


def email(rng: random.Random) -> str:
    user = f"{rng.choice(FIRST).lower()}.{rng.choice(LAST).lower()}{rng.randrange(1, 99)}"
    return f"{user}@{rng.choice(['example.com', 'mail.test', 'inbox.example.org'])}"


SLOT_KINDS = (
    Kind(
        "destination",
        "destination",
        "slot",
        pick(CITIES),
        (),
        (
            "change the destination to {v}",
            "actually I want to go to {v}",
            "make the destination {v}",
            "let's fly to {v} instead",
            "destination: {v}",
            "I'd rather go to {v}",
        ),
        ("where am I flying to?", "what is my destination?", "which city am I going to?"),
    ),
    Kind(
        "origin",
        "origin",
        "slot",
        pick(CITIES),
        (),
        (
            "change the origin to {v}",
            "I'll be leaving from {v} instead",
            "depart from {v}",
            "actually from {v}",
            "origin: {v}",
            "I'm flying out of {v} now",
        ),
        ("where do I fly from?", "what is my origin?", "which city do I leave from?"),
    ),
    Kind(
        "date",
        "date",
        "slot",
        lambda rng: a_date(rng).isoformat(),
        (),
        (
            "change the date to {v}",
            "move it to {v}",
            "can we do {v} instead",
            "make it {v}",
            "actually {v} works better",
            "the date should be {v}",
        ),
        ("when is my flight?", "what date do I fly?", "which day is the flight?"),
    ),
    Kind(
        "cabin class",
        "cabin_class",
        "slot",
        pick(("economy", "business", "first")),
        (),
        (
            "make it {v}",
            "change to {v} class",
            "I'd rather fly {v}",
            "cabin: {v}",
            "switch to {v}",
            "put me in {v} class",
        ),
        ("which cabin did I choose?", "what class am I flying?"),
    ),
    Kind(
        "name spelling",
        "passenger_name",
        "slot",
        a_name,
        (),
        (
            "the passenger is {v}",
            "passenger name: {v}",
            "correct the name to {v}",
            "sorry, the name is {v}",
            "it should say {v} on the ticket",
            "actually the name is spelled {v}",
        ),
        ("what is the passenger's name?", "how is my name spelled on the booking?"),
        lambda old, rng: respelled(old, rng),
    ),
)

NOTE_KINDS = (
    Kind(
        "seat",
        "seat",
        "note",
        pick(("window", "aisle", "middle", "exit row", "front row")),
        ("my seat is by the {v}", "I'd like a {v} seat", "please give me a {v} seat"),
        ("change it to {v}", "actually make my seat {v}", "I'd prefer {v} now"),
        ("which seat do I have?", "where am I sitting?"),
    ),
    Kind(
        "diet",
        "diet",
        "note",
        pick(("vegetarian", "vegan", "halal", "kosher", "gluten-free", "pescatarian")),
        ("I eat {v} food", "my diet is {v}", "note that I am {v}"),
        ("I've gone {v} these days", "my diet is {v} now", "please note I'm {v} instead"),
        ("what is my dietary preference?", "what do I eat?"),
    ),
    Kind(
        "budget",
        "budget",
        "note",
        money,
        ("my budget is {v}", "I can spend up to {v}", "keep it under {v}"),
        ("raise the budget to {v}", "my budget is now {v}", "let's say {v} at most"),
        ("what is my budget?", "how much can I spend?"),
    ),
    Kind(
        "home city",
        "home_city",
        "note",
        pick(CITIES),
        ("I live in {v}", "my home is in {v}", "I'm based in {v}"),
        ("I moved to {v}", "I live in {v} now", "my new home is in {v}"),
        ("where do I live?", "what is my home city?"),
    ),
    Kind(
        "hotel",
        "hotel",
        "note",
        pick(("Hilton", "Marriott", "Hyatt", "Novotel", "Ibis", "Sheraton", "Westin", "Radisson")),
        ("I'm staying at the {v}", "my hotel is the {v}", "put me at the {v}"),
        ("I switched hotels to the {v}", "my hotel is the {v} now", "I'd rather stay at the {v}"),
        ("which hotel am I staying at?", "where is my hotel?"),
    ),
    Kind(
        "meal",
        "meal",
        "note",
        pick(("chicken", "pasta", "fish", "beef", "noodles", "curry", "salad")),
        ("I'd like the {v} meal", "for the meal I'll have {v}", "{v} for my meal please"),
        ("swap my meal for {v}", "I'll have {v} instead", "make my meal {v}"),
        ("which meal did I pick?", "what am I eating on board?"),
    ),
    Kind(
        "room",
        "room_type",
        "note",
        pick(("single room", "double room", "twin room", "suite", "studio")),
        ("I need a {v}", "book me a {v}", "a {v} would be ideal"),
        ("let's get a {v} instead", "change my room to a {v}", "I'd prefer a {v} now"),
        ("what kind of room do I have?", "which room type did I ask for?"),
    ),
    Kind(
        "rental car",
        "rental_car",
        "note",
        pick(("compact", "SUV", "convertible", "minivan", "sedan", "hatchback")),
        ("I'd like a {v} to drive there", "reserve a {v} rental", "a {v} rental for me"),
        ("make the rental a {v}", "I'd rather drive a {v}", "swap the rental to a {v}"),
        ("which rental car did I reserve?", "what car am I getting?"),
    ),
    Kind(
        "allergy",
        "allergy",
        "note",
        pick(("peanuts", "shellfish", "gluten", "dairy", "eggs", "sesame", "soy")),
        ("I'm allergic to {v}", "note my allergy to {v}", "{v} make me sick"),
        (
            "sorry, it's {v} I'm allergic to",
            "correction: my allergy is {v}",
            "it turns out it's {v}",
        ),
        ("what am I allergic to?", "which allergy should the crew know about?"),
    ),
    Kind(
        "e-mail",
        "email",
        "note",
        email,
        ("my e-mail is {v}", "write to me at {v}", "my address for receipts is {v}"),
        ("use {v} from now on", "my new e-mail is {v}", "send receipts to {v} instead"),
        ("what is my e-mail?", "where do receipts go?"),
    ),
    Kind(
        "bags",
        "checked_bags",
        "note",
        pick(("one bag", "two bags", "three bags", "no bags")),
        ("I'm checking {v}", "I'll have {v} to check", "count {v} for me"),
        ("make that {v}", "I'll check {v} after all", "update it to {v}"),
        ("how many bags am I checking?", "what luggage do I have?"),
    ),
)
KINDS = SLOT_KINDS + NOTE_KINDS

# -- filler -------------------------------------------------------------------------------------
# Chit-chat the engine does not understand: no places, dates, numbers, names, cabin words,
# yes/no or control words, no other agent's trigger words.
TOPICS = (
    "painting",
    "chess",
    "gardening",
    "baking bread",
    "knitting",
    "jazz",
    "old movies",
    "birdwatching",
    "pottery",
    "crossword puzzles",
    "yoga",
    "photography",
    "board games",
    "poetry",
    "astronomy",
    "woodworking",
    "tea",
    "houseplants",
    "science fiction",
    "cooking soup",
)
ADJ = (
    "relaxing",
    "tricky",
    "fun",
    "surprising",
    "calming",
    "exhausting",
    "rewarding",
    "odd",
    "lovely",
    "frustrating",
)
WHO = ("my sister", "my neighbour", "my brother", "my cousin", "a colleague", "my aunt", "a friend")
PET = ("cat", "dog", "parrot", "rabbit", "hamster", "goldfish", "turtle")
THING = (
    "the rain",
    "the new café",
    "my garden",
    "the library",
    "this song",
    "the park",
    "my kettle",
    "the museum",
    "that podcast",
    "the bakery",
)
FILLER = (
    "I've been doing a lot of {topic} lately, it's {adj}.",
    "Do you think {topic} is {adj}?",
    "{who} keeps telling me to try {topic}.",
    "Honestly {thing} has been {adj}.",
    "I just finished a {adj} book about {topic}.",
    "hmm, let me think about {topic} for a moment",
    "not sure why, but {thing} always makes me smile",
    "I read somewhere that {topic} can be {adj}.",
    "my {pet} sat on the keyboard again",
    "{who} adopted a {pet}, it is so {adj}",
    "I keep meaning to tidy up, but {topic} is more {adj}",
    "have you ever tried {topic}?",
    "{thing} was {adj} as usual",
    "I was chatting with {who} about {topic}",
    "the smell of {thing} reminds me of childhood",
    "I think I need more coffee",
    "sorry, just thinking out loud",
    "{who} says {topic} is overrated",
    "what a {adj} afternoon",
    "I wonder if my {pet} misses me",
    "let me grab some water",
    "one moment, {who} is calling",
    "I should really start {topic} again",
    "it's quiet around here",
    "I love the sound of {thing}",
    "{topic} is harder than it looks",
    "I watched a documentary on {topic}, quite {adj}",
    "my {pet} hates {thing}",
    "anyway, where was I",
    "that reminds me of {who}",
    "do people still enjoy {topic}?",
    "I might sign up for a class on {topic}",
    "{thing} is my favourite spot",
    "I'm a bit tired, to be honest",
    "{who} brought cookies, they were {adj}",
    "I can't decide between {topic} and {topic2}",
    "there's a bird outside my window",
    "the kettle just boiled",
    "I spilled tea on my notes, how {adj}",
    "the plants need watering",
)


def filler(rng: random.Random) -> str:
    topic, topic2 = rng.sample(TOPICS, 2)
    return rng.choice(FILLER).format(
        topic=topic,
        topic2=topic2,
        adj=rng.choice(ADJ),
        who=rng.choice(WHO),
        pet=rng.choice(PET),
        thing=rng.choice(THING),
    )


# -- a probe ------------------------------------------------------------------------------------
@dataclass
class Check:
    point: str
    budget: int
    current: bool
    stale_as_current: bool
    stale_elsewhere: bool
    tokens: int
    build_ms: float


@dataclass
class Probe:
    kind: str
    via: str
    values: list[str]
    """Every value the attribute took, in order (as the task / notes hold it)."""
    intended: list[str]
    gaps: list[int]
    misunderstood: int = 0
    collateral: int = 0
    disturbed: int = 0
    checks: list[Check] = field(default_factory=list)


def entity_values(prompt: str, attribute: str) -> list[str]:
    """The values of the prompt's entity lines for ``attribute`` (see the module's doc)."""
    out = []
    for line in prompt.splitlines():
        if line.startswith(f"{attribute}: "):
            out.append(line[len(attribute) + 2 :].split(" (changed from ", 1)[0].strip())
    return out


def state_says(prompt: str, attribute: str, value: str) -> bool:
    """Whether the task state line lists ``attribute=value`` among what is filled."""
    for line in prompt.splitlines():
        if "; filled: " in line:
            filled = line.split("; filled: ", 1)[1].rsplit("; missing: ", 1)[0]
            return f"{attribute}={value}" in [p.strip() for p in filled.split(", ")]
    return False


def mentions(value: str) -> list[str]:
    """How a value may be written in turns: a date also as the agent says it."""
    try:
        d = date.fromisoformat(value)
    except ValueError:
        return [value]
    return [value, long_date(d)]


def check(
    prompt: str, attribute: str, current: str, replaced: Sequence[str], slot: bool
) -> tuple[bool, bool, bool]:
    values = entity_values(prompt, attribute)
    stale_current = any(v in replaced for v in values) or (
        slot and any(state_says(prompt, attribute, r) for r in replaced)
    )
    rest = "\n".join(ln for ln in prompt.splitlines() if not ln.startswith(f"{attribute}: "))
    if slot:
        rest = "\n".join(ln for ln in rest.splitlines() if "; filled: " not in ln)
    lowered = rest.casefold()
    elsewhere = any(m.casefold() in lowered for r in replaced for m in mentions(r))
    return current in values, stale_current, elsewhere


class Bench:
    """One store, the demo agents, a recorder; one user per probe."""

    def __init__(self, workdir: Path, counter: TokenCounter) -> None:
        self.rt = Runtime(
            open_store(f"sqlite:///{workdir / 'updates.db'}"), templates(workdir / "l.db")
        )
        self.layers = MemoryLayers.of(self.rt)
        self.conv = Conversation(self.rt, memory=Recorder(self.layers, clock=self.rt.clock))
        self.counter = counter
        self.turn_ms: list[float] = []
        self.context_ms: dict[int, list[float]] = {b: [] for b in BUDGETS}

    def say(self, scope: Scope, text: str) -> Turn:
        started = time.perf_counter()
        turn = self.conv.handle(scope, text, f"{scope.user_id}-s1")
        self.turn_ms.append((time.perf_counter() - started) * 1e3)
        return turn

    def close(self) -> None:
        self.rt.close()

    def run(self, n: int, kind: Kind, rng: random.Random, gap: tuple[int, int]) -> Probe:
        scope = Scope.user(f"probe-{n}")
        tasks = self.layers.tasks
        assert tasks is not None
        slots = {
            "origin": rng.choice(CITIES),
            "destination": rng.choice(CITIES),
            "date": a_date(rng),
            "cabin_class": rng.choice(("economy", "business", "first")),
            "passenger_name": a_name(rng),
        }
        while slots["destination"] == slots["origin"]:
            slots["destination"] = rng.choice(CITIES)
        self.say(scope, f"book a flight from {slots['origin']} to {slots['destination']}")
        d = slots["date"]
        assert isinstance(d, date)
        turn = self.say(
            scope,
            f"{spoken_date(d, rng)}, {slots['cabin_class']}, for {slots['passenger_name']}",
        )
        if turn.state is None:
            raise RuntimeError(f"probe {n}: no booking started ({turn.reply!r})")
        task_id = turn.state.task.id

        def state() -> TaskState:
            return self.rt.task(scope, task_id)

        def noted(text: str, name: str, value: str) -> None:
            said = self.say(scope, text)
            user = next(m for m in said.messages if m.role == "user")
            tasks.note(state().task, name, value, source=turn_id(user))

        # two unchanging noted attributes around the one under test
        others = [k for k in NOTE_KINDS if k.attribute != kind.attribute]
        for other in rng.sample(others, 2):
            value = other.draw(rng)
            noted(rng.choice(other.say).format(v=value), other.attribute, value)
        if kind.via == "slot":
            first = state().task.slots.get(kind.attribute)
            values = [str(first)]
        else:
            first = kind.draw(rng)
            noted(rng.choice(kind.say).format(v=first), kind.attribute, first)
            values = [first]
        probe = Probe(kind.name, kind.via, values, [values[0]], [])
        changes = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        expected = dict(state().task.slots)
        for c in range(changes):
            n_fill = rng.randint(*gap) if c == 0 else rng.randint(gap[0], max(gap[0], gap[1] // 2))
            probe.gaps.append(n_fill)
            self.fill(scope, task_id, expected, n_fill, probe, rng, kind)
            new = self.new_value(kind, probe.values, rng)
            probe.intended.append(new)
            spoken = spoken_date(date.fromisoformat(new), rng) if kind.attribute == "date" else new
            text = rng.choice(kind.change).format(v=spoken)
            if kind.via == "slot":
                self.say(scope, text)
                now = dict(state().task.slots)
                if str(now.get(kind.attribute)) != new:
                    probe.misunderstood += 1
                if any(now.get(k) != v for k, v in expected.items() if k != kind.attribute):
                    probe.collateral += 1
                expected = now
                got = str(now.get(kind.attribute))
                if got != probe.values[-1]:
                    probe.values.append(got)
            else:
                noted(text, kind.attribute, new)
                now = dict(state().task.slots)
                if now != expected:
                    probe.collateral += 1
                expected = now
                probe.values.append(new)
        self.measure(scope, task_id, kind, probe, POINTS[0], None)
        self.fill(scope, task_id, expected, TRAILING, probe, rng, kind)
        self.measure(scope, task_id, kind, probe, POINTS[1], None)
        self.measure(scope, task_id, kind, probe, POINTS[2], rng.choice(kind.ask))
        return probe

    def new_value(self, kind: Kind, seen: list[str], rng: random.Random) -> str:
        for _ in range(100):
            new = kind.next_value(seen[-1], rng) if kind.next_value else kind.draw(rng)
            if new not in seen:
                return new
        raise RuntimeError(f"{kind.name}: no fresh value")

    def fill(
        self,
        scope: Scope,
        task_id: str,
        expected: dict[str, Any],
        n: int,
        probe: Probe,
        rng: random.Random,
        kind: Kind,
    ) -> None:
        """``n`` filler turns; one that touches the task is counted, and should it move the
        slot under test, the probe follows the task (its value is what the task holds)."""
        for _ in range(n):
            turn = self.say(scope, filler(rng))
            task = turn.state.task if turn.state is not None else None
            if task is None or task.id != task_id or task.slots != expected:
                probe.disturbed += 1
                task = self.rt.task(scope, task_id).task
                expected.clear()
                expected.update(task.slots)
                got = str(task.slots.get(kind.attribute))
                if kind.via == "slot" and got != probe.values[-1]:
                    probe.values.append(got)

    def measure(
        self,
        scope: Scope,
        task_id: str,
        kind: Kind,
        probe: Probe,
        point: str,
        query: str | None,
    ) -> None:
        st = self.rt.task(scope, task_id)
        current = probe.values[-1]
        replaced = [v for v in probe.values[:-1] if v != current]
        for budget in BUDGETS:
            started = time.perf_counter()
            built = task_context(self.layers, st, query=query, budget=budget, counter=self.counter)
            took = (time.perf_counter() - started) * 1e3
            self.context_ms[budget].append(took)
            ok, stale, elsewhere = check(
                built.context.prompt, kind.attribute, current, replaced, kind.via == "slot"
            )
            probe.checks.append(
                Check(point, budget, ok, stale, elsewhere, built.context.tokens, took)
            )


# -- tables -------------------------------------------------------------------------------------
def share(flags: Sequence[bool]) -> float:
    return 100.0 * sum(flags) / len(flags) if flags else float("nan")


def cell(current: float, stale: float) -> str:
    cur = f"[{'green' if current == 100 else 'red'}]{current:.0f}%[/]"
    old = f"[{'green' if stale == 0 else 'red'}]{stale:.0f}%[/]"
    return f"{cur} / {old}"


def render_main(console: Console, probes: Sequence[Probe]) -> None:
    table = Table(
        title="Updates: current value present / stale value presented as current "
        "(targets 100% / 0%), per attribute kind, point and budget",
        title_justify="left",
    )
    table.add_column("kind")
    table.add_column("via")
    table.add_column("probes", justify="right")
    for point in POINTS:
        for budget in BUDGETS:
            table.add_column(f"{point}\n{budget // 1000}k", justify="right")
    groups = [(k.name, [p for p in probes if p.kind == k.name]) for k in KINDS]
    groups.append(("all", list(probes)))
    for name, mine in groups:
        if not mine:
            continue
        if name == "all":
            table.add_section()
        cells = []
        for point in POINTS:
            for budget in BUDGETS:
                cs = [c for p in mine for c in p.checks if c.point == point and c.budget == budget]
                cells.append(
                    cell(share([c.current for c in cs]), share([c.stale_as_current for c in cs]))
                )
        via = mine[0].via if name != "all" else ""
        table.add_row(name, via, str(len(mine)), *cells)
    console.print(table)


def render_detail(console: Console, probes: Sequence[Probe]) -> None:
    table = Table(title="What each kind went through", title_justify="left")
    table.add_column("kind")
    for h in (
        "probes",
        "changes",
        "filler before a change\nmin / mean / max",
        "changes not applied\nas intended",
        "changes that moved\nanother slot",
        "filler turns that\ntouched the task",
        "stale mentioned elsewhere\n(after change / +20 / asked, 4k)",
        "tokens used\n(+20, 1k / 4k)",
    ):
        table.add_column(h, justify="right")
    groups = [(k.name, [p for p in probes if p.kind == k.name]) for k in KINDS]
    groups.append(("all", list(probes)))
    for name, mine in groups:
        if not mine:
            continue
        if name == "all":
            table.add_section()
        gaps = [g for p in mine for g in p.gaps]
        changes = sum(len(p.gaps) for p in mine)
        elsewhere = []
        for point in POINTS:
            cs = [c for p in mine for c in p.checks if c.point == point and c.budget == 4000]
            elsewhere.append(f"{share([c.stale_elsewhere for c in cs]):.0f}%")
        tok = [
            statistics.fmean(
                c.tokens for p in mine for c in p.checks if c.point == POINTS[1] and c.budget == b
            )
            for b in (1000, 4000)
        ]
        table.add_row(
            name,
            str(len(mine)),
            str(changes),
            f"{min(gaps)} / {statistics.fmean(gaps):.0f} / {max(gaps)}",
            str(sum(p.misunderstood for p in mine)),
            str(sum(p.collateral for p in mine)),
            str(sum(p.disturbed for p in mine)),
            " / ".join(elsewhere),
            f"{tok[0]:.0f} / {tok[1]:.0f}",
        )
    console.print(table)


def render_timing(console: Console, bench: Bench) -> None:
    table = Table(title="Cost on this machine", title_justify="left")
    table.add_column("what")
    for h in ("n", "p50 ms", "p95 ms", "max ms"):
        table.add_column(h, justify="right")
    rows = [("a turn (engine + recorder)", bench.turn_ms)]
    rows += [(f"task_context at {b:,} tokens", bench.context_ms[b]) for b in BUDGETS]
    for what, ms in rows:
        table.add_row(
            what,
            f"{len(ms):,}",
            f"{statistics.median(ms):.1f}",
            f"{pct(ms, 0.95):.1f}",
            f"{max(ms):.1f}",
        )
    console.print(table)


# -- main ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 probes a kind, 50-80 filler turns")
    parser.add_argument("--probes", type=int, help="probes per attribute kind (default 8)")
    parser.add_argument("--seed", type=int, default=11, help="the random seed (11)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    per_kind = args.probes or (2 if args.quick else 8)
    gap = (50, 80) if args.quick else (50, 300)
    console = make_console(200)
    facts = machine_facts()
    console.print(facts_line(facts))
    counter = default_counter()
    console.print(
        f"{len(KINDS)} attribute kinds x {per_kind} probes, seed {args.seed}, filler "
        f"{gap[0]}-{gap[1]} turns before the first change, conversation clock {NOW}, "
        f"token counter {counter.name}"
    )
    rng = random.Random(args.seed)
    plan = [kind for _ in range(per_kind) for kind in KINDS]
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-updates-"))
    probes: list[Probe] = []
    bench = Bench(workdir, counter)
    try:
        with progress_bar(console) as progress:
            bar = progress.add_task("probes", total=len(plan))
            for n, kind in enumerate(plan):
                probes.append(bench.run(n, kind, rng, gap))
                progress.advance(bar)
    finally:
        bench.close()
        shutil.rmtree(workdir, ignore_errors=True)
    took = time.perf_counter() - started
    render_main(console, probes)
    render_detail(console, probes)
    render_timing(console, bench)
    console.print(
        "Points: 'after change' = right after the last change, the query being that turn; "
        f"'+20 turns' = after {TRAILING} more filler turns (the change is out of the recent "
        "window); '+20, asked' = the same with the query asking about the attribute. "
        "'stale mentioned elsewhere' = a replaced value appears in the prompt outside the "
        "entity and state lines (older turns, summaries, long-term hits): no target."
    )
    console.print(f"{len(bench.turn_ms):,} turns; ran in {took:.1f} s")
    out = {"seed": args.seed, "per_kind": per_kind, "probes": [asdict(p) for p in probes]}
    write_json(console, args.json, facts, out, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
