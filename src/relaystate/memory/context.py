"""The context builder: what an agent's memory puts in front of the model for one turn.

Pure: it takes candidates already fetched from every layer (task state, key entities,
summaries, long-term memory, the graph, recent turns) and a token counter, and returns the
prompt and an explanation of every candidate, kept or dropped, and why. The steps:

1. dedupe: one copy of a text (same id, same normalised text, or a near-duplicate) whatever
   layers it came from, the recent turn if it is one; distinct recent turns are never merged
   (saying "yes" twice is two turns);
2. rank: critical candidates first, then score times a per-layer weight, ties by layer, id;
3. cut: take candidates in rank order while they fit (critical ones too: a budget too small
   for all of them keeps those that fit), skipping a summary whose cited turns are all kept
   verbatim and the turns a kept summary covers. Lines are counted as rendered, headers
   included; then the whole prompt is counted, and if it is over the budget after all
   (tokens merged across lines), the cut is redone with that much less;
4. place: models use the start and end of a long context better than its middle, so the task
   state opens the prompt, the recent turns close it in time order (the latest user turn
   last), and the other blocks sit nearest the end their best candidate deserves.

The prompt is one block per layer: a header line, then each candidate's text (stripped) on
its own line or lines, every line ending in a newline, a blank line between blocks.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Literal, get_args

from .tokens import TokenCounter, default_counter

Layer = Literal["task", "entity", "summary", "longterm", "graph", "recent"]
LAYERS: tuple[Layer, ...] = get_args(Layer)

HEADERS: Mapping[Layer, str] = {
    "task": "Task state:",
    "entity": "Key entities:",
    "summary": "Earlier in the conversation:",
    "longterm": "From memory:",
    "graph": "Related facts:",
    "recent": "Recent turns:",
}


@dataclass(frozen=True)
class Candidate:
    """One piece of memory that could go in the prompt.

    ``id`` is stable across layers ("turn:123" is the same turn from long-term search and
    from the recent turns); ``cites`` are the turn ids a summary covers; ``time`` orders the
    recent turns (seconds or a sequence number; without it, input order).
    """

    id: str
    layer: Layer
    text: str
    score: float = 0.0
    critical: bool = False
    cites: tuple[str, ...] = ()
    time: float | None = None


@dataclass(frozen=True)
class Decision:
    """What became of one candidate; ``tokens`` is the count of its text alone."""

    id: str
    layer: Layer
    score: float
    tokens: int
    kept: bool
    reason: str


@dataclass(frozen=True)
class Context:
    """The prompt, its token count (at most ``budget``) and one decision per candidate, in
    the order the candidates came."""

    prompt: str
    tokens: int
    budget: int
    explanation: list[Decision]

    @property
    def kept(self) -> list[str]:
        """The ids of the candidates in the prompt, in input order."""
        return [decision.id for decision in self.explanation if decision.kept]


@dataclass
class _Item:
    index: int
    candidate: Candidate
    text: str
    tokens: int
    key: tuple[bool, float, int, str, int]
    grams: frozenset[str]
    line: int = 0
    aliases: tuple[str, ...] = ()
    reason: str = ""
    kept: bool = False


def build(
    candidates: Iterable[Candidate],
    *,
    window: int | None = None,
    budget_share: float = 0.8,
    budget: int | None = None,
    counter: TokenCounter | None = None,
    weights: Mapping[Layer, float] | None = None,
    near_duplicate: float = 0.9,
    headers: Mapping[Layer, str] | None = None,
) -> Context:
    """The context for one turn within ``budget`` tokens, or ``budget_share`` of ``window``.

    ``weights`` scale each layer's scores (missing layers: 1.0), because scores from
    different searches are not on one scale; ``near_duplicate`` is the Jaccard similarity of
    character trigrams at or above which two texts count as one; ``headers`` replace some
    of ``HEADERS``.
    """
    limit = _budget(window, budget_share, budget)
    if not 0 < near_duplicate <= 1:
        raise ValueError(f"near_duplicate must be in (0, 1], not {near_duplicate}")
    count = (counter or default_counter()).count
    items = _items(list(candidates), count, weights or {})
    ranked = _dedupe([item for item in items if not item.reason], near_duplicate)
    titles = {**HEADERS, **(headers or {})}
    gap = count("\n\n") - count("\n")  # a blank line between blocks, merged or not
    opening = {layer: count(title + "\n") + gap for layer, title in titles.items()}
    allowance = limit
    while True:
        _select(ranked, allowance, opening)
        kept = [item for item in ranked if item.kept]
        prompt = _render(kept, titles)
        used = count(prompt)
        if used <= limit or not kept:
            break
        allowance -= used - limit  # the parts' counts fell short of the whole's: cut more
    explanation = [
        Decision(
            item.candidate.id,
            item.candidate.layer,
            item.candidate.score,
            item.tokens,
            item.kept,
            item.reason,
        )
        for item in items
    ]
    return Context(prompt, used, limit, explanation)


def _budget(window: int | None, share: float, budget: int | None) -> int:
    if (window is None) == (budget is None):
        raise ValueError("give either a window or a budget")
    if budget is not None:
        if budget < 0:
            raise ValueError(f"budget must be >= 0, not {budget}")
        return budget
    assert window is not None
    if window < 1 or not 0 < share <= 1:
        raise ValueError(f"need window >= 1 and 0 < budget_share <= 1, not {window}, {share}")
    return math.floor(window * share)


def _items(
    candidates: Sequence[Candidate], count: Callable[[str], int], weights: Mapping[Layer, float]
) -> list[_Item]:
    items = []
    for index, candidate in enumerate(candidates):
        if candidate.layer not in LAYERS:
            raise ValueError(f"{candidate.id}: layer {candidate.layer!r} is not one of {LAYERS}")
        weighted = candidate.score * weights.get(candidate.layer, 1.0)
        if not math.isfinite(weighted):
            raise ValueError(f"{candidate.id}: score {candidate.score!r} is not a finite number")
        text = candidate.text.strip()
        key = (
            not candidate.critical,
            -weighted,
            LAYERS.index(candidate.layer),
            candidate.id,
            index,
        )
        item = _Item(index, candidate, text, count(text), key, _trigrams(text))
        if text:
            item.line = count(text + "\n")  # as rendered: the newline may merge with its end
        else:
            item.reason = "dropped: empty"
        items.append(item)
    return items


TRIGRAM_CACHE = 2048
"""Texts whose trigram sets are remembered (the latest used, up to ``TRIGRAM_CHARS`` long):
a task's context looks at the same summaries and turns on every turn."""
TRIGRAM_CHARS = 2000


def _trigrams(text: str) -> frozenset[str]:
    return _cached_trigrams(text) if len(text) <= TRIGRAM_CHARS else _text_trigrams(text)


@lru_cache(maxsize=TRIGRAM_CACHE)
def _cached_trigrams(text: str) -> frozenset[str]:
    return _text_trigrams(text)


def _text_trigrams(text: str) -> frozenset[str]:
    norm = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    if len(norm) < 3:
        return frozenset((norm,))
    return frozenset(norm[i : i + 3] for i in range(len(norm) - 2))


def _dedupe(items: list[_Item], threshold: float) -> list[_Item]:
    """One survivor per group of copies, in rank order; the others get their reason.

    A group is ranked as its best copy, but a recent turn in it survives, so that the
    conversation reads in order; two distinct recent turns never share a group.
    """
    groups: list[list[_Item]] = []
    by_id: dict[str, int] = {}
    by_gram: dict[str, list[int]] = {}
    order = _rarity(items)
    for item in sorted(items, key=lambda item: item.key):
        prefix = _prefix(item.grams, order, threshold)
        maybe = {index for gram in prefix for index in by_gram.get(gram, ())}
        if item.candidate.id in by_id:
            maybe.add(by_id[item.candidate.id])
        for index in sorted(maybe):
            group = groups[index]
            if _same(group[0], item, threshold) and not _two_turns(group, item):
                group.append(item)
                break
        else:
            by_id.setdefault(item.candidate.id, len(groups))
            for gram in prefix:
                by_gram.setdefault(gram, []).append(len(groups))
            groups.append([item])
    survivors = []
    for group in groups:
        best = group[0]
        survivor = next((item for item in group if item.candidate.layer == "recent"), best)
        survivor.key = best.key[:2] + survivor.key[2:]
        survivor.aliases = tuple(item.candidate.id for item in group)
        for item in group:
            if item is not survivor:
                same = item.candidate.id == survivor.candidate.id or item.grams == survivor.grams
                kind = "duplicate" if same else "near-duplicate"
                where = f"{survivor.candidate.id} ({survivor.candidate.layer})"
                item.reason = f"dropped: {kind} of {where}"
        survivors.append(survivor)
    return sorted(survivors, key=lambda item: item.key)


def _rarity(items: list[_Item]) -> dict[str, int]:
    """A total order of trigrams, rarest first, for the prefix filter."""
    seen = Counter(chain.from_iterable(item.grams for item in items))
    return {gram: place for place, gram in enumerate(sorted(seen, key=lambda g: (seen[g], g)))}


def _prefix(grams: frozenset[str], order: Mapping[str, int], threshold: float) -> list[str]:
    """The rarest grams of a set, as many as guarantee that any set at least ``threshold``
    similar to it shares one of them with this prefix of its own (the prefix filter of
    set-similarity joins): a lookup instead of a comparison with every text."""
    keep = len(grams) - math.ceil(threshold * len(grams)) + 1
    return sorted(grams, key=order.__getitem__)[:keep]


def _same(a: _Item, b: _Item, threshold: float) -> bool:
    if a.candidate.id == b.candidate.id:
        return True
    x, y = len(a.grams), len(b.grams)
    if min(x, y) < threshold * max(x, y):  # too different in size to reach the threshold
        return False
    shared = len(a.grams & b.grams)
    return shared >= threshold * (x + y - shared)


def _two_turns(group: list[_Item], item: _Item) -> bool:
    """Whether ``item`` is a recent turn other than one already in ``group`` ("yes" twice)."""
    return item.candidate.layer == "recent" and any(
        other.candidate.layer == "recent" and other.candidate.id != item.candidate.id
        for other in group
    )


def _select(ranked: list[_Item], limit: int, opening: Mapping[Layer, int]) -> None:
    """Keep candidates in rank order while they fit; set every survivor's reason.

    A candidate needs its line, newline included, and its block's header if it opens it.
    """
    used = 0
    opened: set[Layer] = set()
    kept: set[str] = set()
    covered: dict[str, str] = {}
    # only candidates' ids are ever looked up in ``covered``: a merged summary cites every
    # older turn of its task (10,000 at 10,000 turns), and noting each was a loop in Python
    ids = {alias for item in ranked for alias in item.aliases}
    for rank, item in enumerate(ranked, 1):
        candidate = item.candidate
        critical = not item.key[0]
        item.kept = False
        cover = next((covered[alias] for alias in item.aliases if alias in covered), None)
        if not critical and cover is not None:
            item.reason = f"dropped: covered by {cover} which is kept"
            continue
        cites = candidate.cites
        if not critical and cites and all(turn in kept for turn in cites):
            item.reason = f"dropped: its turns are kept verbatim ({', '.join(cites)})"
            continue
        cost = item.line + (0 if candidate.layer in opened else opening[candidate.layer])
        if used + cost > limit:
            what = "critical, over budget" if critical else "over budget"
            item.reason = f"dropped: {what} (needs {cost} tokens, {max(limit - used, 0)} left)"
            continue
        used += cost
        opened.add(candidate.layer)
        kept.update(item.aliases)
        for turn in ids.intersection(cites):
            covered.setdefault(turn, candidate.id)
        item.kept = True
        item.reason = "kept: critical" if critical else f"kept: rank {rank}"


def _render(kept: list[_Item], headers: Mapping[Layer, str]) -> str:
    """Blocks by layer: task state first, recent turns last, the rest nearest the end their
    best candidate deserves; ``kept`` is in rank order."""
    blocks: dict[Layer, list[_Item]] = {}
    for item in kept:
        blocks.setdefault(item.candidate.layer, []).append(item)
    middle = [layer for layer in blocks if layer not in ("task", "recent")]  # by best rank
    front, back = middle[0::2], middle[1::2]
    parts = []
    for layer in ("task", *front, *reversed(back), "recent"):
        items = blocks.get(layer)
        if not items:
            continue
        if layer == "recent":
            items = sorted(items, key=_chronological)
        elif layer in back:
            items = items[::-1]  # the best nearest the end
        parts.append("".join(f"{line}\n" for line in (headers[layer], *(i.text for i in items))))
    return "\n".join(parts)


def _chronological(item: _Item) -> tuple[bool, float, int]:
    time = item.candidate.time
    return (time is None, 0.0 if time is None else time, item.index)
