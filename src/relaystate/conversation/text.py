"""Text helpers shared by the extractors: index-preserving folding and phrase matching.

Every extractor works on ``fold(text)``, which has exactly the same length as ``text`` so a
span found in the folded text cuts the user's own words out of the original.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN_WORD = re.compile(r"[^\W\d_]+", re.ASCII)
_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u3000": " "}
NEVER = re.compile(r"(?!x)x")

#: Characters that end a sentence; free text stops there.
SENTENCE_END = "。！？!?；;\n"
#: Characters that end a clause; short values (places, names) stop there.
CLAUSE_END = SENTENCE_END + '，,、:：…~～()（）[]【】《》<>"“”/|'


def fold(text: str, *, lower: bool = True) -> str:
    """Lower-case (unless ``lower`` is false), half-width, straight-quoted ``text``, with the
    same length as ``text``."""
    if text.isascii():  # ASCII folds to itself (lower-cased): one C call, no per-character work
        return text.lower() if lower else text
    table = _LOWER if lower else _KEEP
    return "".join([table.get(ch) or _fold_char(ch, lower) for ch in text])


_LOWER: dict[str, str] = {}
_KEEP: dict[str, str] = {}


def _fold_char(ch: str, lower: bool) -> str:
    """One character folded, remembered (the alphabet a deployment sees is small)."""
    quoted = _QUOTES.get(ch, ch)
    normal = unicodedata.normalize("NFKC", quoted)
    if len(normal) != 1:
        normal = quoted
    folded = normal.lower() if lower else normal
    out = folded if len(folded) == 1 else normal
    table = _LOWER if lower else _KEEP
    if len(table) < 65_536:
        table[ch] = out
    return out


def is_cjk(ch: str) -> bool:
    return bool(CJK.match(ch))


def _phrase(phrase: str) -> str:
    body = r"\s+".join(re.escape(word) for word in phrase.split())
    head = r"(?<![a-z0-9])" if phrase[0].isascii() and phrase[0].isalnum() else ""
    tail = r"(?![a-z0-9])" if phrase[-1].isascii() and phrase[-1].isalnum() else ""
    return head + body + tail


def phrase_source(phrases: Iterable[str]) -> str:
    """A regex alternation of ``phrases``, longest first, with word boundaries for ASCII."""
    folded = {" ".join(fold(p).split()) for p in phrases}
    ordered = sorted((p for p in folded if p), key=lambda p: (-len(p), p))
    return "|".join(_phrase(p) for p in ordered)


def phrases(items: Iterable[str]) -> re.Pattern[str]:
    """Compile ``items`` into one pattern that matches any of them in folded text."""
    source = phrase_source(items)
    return re.compile(source) if source else NEVER


def overlaps(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in spans)


def strip_punct(text: str) -> str:
    return text.strip(" \t\r\n" + CLAUSE_END + ".'-")


def wordlist(text: str, sep: str | None = None) -> list[str]:
    """Split a vocabulary block into its entries (``sep`` between them, else whitespace)."""
    return [w.strip() for w in text.split(sep) if w.strip()]
