"""Extractive summaries: the sentences of older turns that carry what a task depends on.

No model: a sentence is kept when it holds a key term (a slot's value, an entity's name), a
decision ("yes", "cancel", "change", "confirm"...), a number or a date, ranked by how many it
holds, cut to a character budget, and put back in the order it was said. Each kept sentence
starts with its turn id, so a summary cites what it covers line by line, and a summary of
summaries keeps those ids. A configured model may write abstractive summaries instead
(``relaystate.memory.working``): kept only when :func:`faithful` to the turns they cite.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DECISIONS = re.compile(
    r"\b(yes|no|confirm\w*|cancel\w*|chang\w*|instead|switch\w*|prefer\w*|decid\w*|agree\w*"
    r"|book\w*|refund\w*|pay\w*|order\w*|address|deadline|always|never|don't|do not)\b"
    r"|[确认取消改换要订退付]",
    re.IGNORECASE,
)
NUMBERS = re.compile(r"\d")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\n+")
DEFAULT_BUDGET = 600
AGENT_SHARE = 0.25
"""How much an agent's sentence counts against a user's: what the user said is what a
summary must keep; the agent mostly reads the task's state back, which the task state and
the entities already hold (and a read-back of a replaced value misleads)."""
RESTATES = re.compile(
    r"please confirm|is that right|\(yes/no\)|请确认|对吗|是否正确", re.IGNORECASE
)
"""Characters a summary may have."""


@dataclass(frozen=True)
class Said:
    """One turn to summarise: its id (what the summary cites), who said it, what."""

    id: str
    speaker: str
    text: str


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def weight(sentence: str, terms: Iterable[str]) -> float:
    """How much a sentence carries: key terms count most, then decisions, then numbers."""
    low = sentence.casefold()
    score = 3.0 * sum(1 for t in terms if t and t.casefold() in low)
    score += 2.0 * len(DECISIONS.findall(sentence))
    score += 1.0 if NUMBERS.search(sentence) else 0.0
    return score


def extractive(
    turns: Sequence[Said], terms: Iterable[str] = (), *, budget: int = DEFAULT_BUDGET
) -> tuple[str, tuple[str, ...]]:
    """A summary of ``turns`` within ``budget`` characters, and the turn ids it cites (every
    turn it covers, kept sentence or not: a turn with nothing worth keeping was read)."""
    keys = [t for t in terms if t]
    candidates: list[tuple[float, int, str]] = []
    for order, turn in enumerate(turns):
        agent = turn.speaker != "user"
        for part in sentences(turn.text):
            if len(part) < 4 or (agent and RESTATES.search(part)):
                continue  # "(yes/no)"; the agent's read-back of the task's own state
            line = f"[{turn.id}] {turn.speaker}: {part}"
            score = weight(part, keys) * (AGENT_SHARE if agent else 1.0)
            candidates.append((score, order, line))
    ranked = sorted(candidates, key=lambda c: (-c[0], c[1]))
    kept: list[tuple[int, str]] = []
    used = 0
    for score, order, line in ranked:
        if score <= 0 and kept:
            break  # plain chatter goes only when nothing else was said
        if used + len(line) + 1 > budget:
            continue
        kept.append((order, line))
        used += len(line) + 1
    text = "\n".join(line for _, line in sorted(kept, key=lambda k: k[0]))
    return text, tuple(dict.fromkeys(t.id for t in turns))


def merged(parts: Sequence[str], terms: Iterable[str] = (), *, budget: int = DEFAULT_BUDGET) -> str:
    """A summary of summaries: their lines (each still led by its turn id) ranked and cut
    the same way."""
    keys = [t for t in terms if t]
    lines = [line for part in parts for line in part.splitlines() if line.strip()]
    ranked = sorted(enumerate(lines), key=lambda p: (-weight(p[1], keys), p[0]))
    kept: list[tuple[int, str]] = []
    used = 0
    for order, line in ranked:
        if used + len(line) + 1 <= budget:
            kept.append((order, line))
            used += len(line) + 1
    return "\n".join(line for _, line in sorted(kept))


_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_NAME = re.compile(r"(?<![.!?。！？]\s)(?<!^)\b[A-Z][\w'’-]*[A-Za-z0-9]", re.MULTILINE)
_CJK_NAME = re.compile(r"[\u4e00-\u9fff]{2,}")


def faithful(summary: str, turns: Sequence[Said]) -> bool:
    """Whether a model's summary says nothing the turns do not: every number, every name
    (a capitalised word inside a sentence) and, in Chinese, every run of characters of the
    summary that is no paraphrase must appear in the cited turns. Strict on purpose: a
    rejected summary costs only the extractive one instead."""
    source = " ".join(f"{t.speaker} {t.text}" for t in turns).casefold()
    if any(n not in source for n in _NUMBER.findall(summary)):
        return False
    return all(name.casefold() in source for name in _NAME.findall(summary))


def abstract_line(turns: Sequence[Said], text: str) -> str:
    """A model's summary as one cited line: ``[first…last] text``."""
    first, last = turns[0].id, turns[-1].id
    cited = first if first == last else f"{first}…{last}"
    return f"[{cited}] " + " ".join(text.split())
