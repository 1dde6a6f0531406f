"""Choice words typed with a slip: "bussiness", "frist class", "Xiomi 14", "商物舱".

English and other Latin words are compared with rapidfuzz (a ratio over the whole word or
words); Chinese words only when they differ from a choice by one character and the task is
asking for exactly that slot. A match must stand out: two choices about as close are no match.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

CUTOFF = 80.0
"""The lowest rapidfuzz ratio (0-100) a Latin word may have to count as a choice."""
ASKED_CUTOFF = 70.0
"""The same when the task just asked for that slot: two slips in a word ("ecomony")."""
MARGIN = 5.0
"""How far the best choice must be ahead of the next one."""
MIN_LENGTH = 5
"""Shorter Latin words are too easily another word ("fist", "econ")."""

_LATIN = re.compile(r"[a-z0-9][a-z0-9'.\-]*")


def latin(
    folded: str, terms: Mapping[str, str], *, asked: bool = False
) -> list[tuple[int, int, str]]:
    """(start, end, choice) for the runs of 1-3 Latin words that are close to a choice term;
    ``asked`` when the task just asked for this choice (a looser match then)."""
    cutoff = ASKED_CUTOFF if asked else CUTOFF
    from rapidfuzz import fuzz, process

    words = list(_LATIN.finditer(folded))
    found: list[tuple[int, int, str]] = []
    taken: set[int] = set()
    for size in (3, 2, 1):
        candidates = [t for t in terms if t.isascii() and len(t.split()) == size]
        if not candidates:
            continue
        for i in range(len(words) - size + 1):
            run = words[i : i + size]
            if any(j in taken for j in range(i, i + size)):
                continue
            if any(folded[a.end() : b.start()].strip() for a, b in itertools.pairwise(run)):
                continue
            text = " ".join(w.group() for w in run)
            if len(text.replace(" ", "")) < MIN_LENGTH or text in terms:
                continue
            best = process.extract(text, candidates, scorer=fuzz.ratio, limit=2)
            if not best or best[0][1] < cutoff:
                continue
            if (
                len(best) > 1
                and best[0][1] - best[1][1] < MARGIN
                and terms[best[0][0]] != terms[best[1][0]]
            ):
                continue
            found.append((run[0].start(), run[-1].end(), terms[best[0][0]]))
            taken.update(range(i, i + size))
    return found


def chinese(folded: str, terms: Mapping[str, str]) -> list[tuple[int, int, str]]:
    """(start, end, choice) for a Chinese word one character away from a choice term."""
    found = []
    for term, choice in terms.items():
        if term.isascii() or len(term) < 3:
            continue
        n = len(term)
        for start in range(len(folded) - n + 1):
            window = folded[start : start + n]
            if sum(a != b for a, b in zip(window, term, strict=True)) == 1:
                found.append((start, start + n, choice))
    choices = {c for _, _, c in found}
    return found if len(choices) == 1 else []
