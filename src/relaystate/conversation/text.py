"""Text helpers shared by the extractors: index-preserving folding and phrase matching.

Every extractor works on ``fold(text)``, which has exactly the same length as ``text`` so a
span found in the folded text cuts the user's own words out of the original.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

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


def needs_non_ascii(pattern: re.Pattern[str]) -> bool:
    """Whether every match of ``pattern`` contains a non-ASCII character, so that it can be
    skipped on ASCII text. Conservative: False whenever the structure is not plainly so."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # pragma: no cover - a Python whose parser moved: scan everything
        return False
    return _required_non_ascii(list(tree))


def _required_non_ascii(items: list[tuple[Any, Any]]) -> bool:
    """A sequence requires a non-ASCII character if one of its mandatory items does."""
    from re import _constants as c  # type: ignore[attr-defined]

    for op, av in items:
        if op is c.LITERAL and av > 127:
            return True
        if (
            op is c.IN
            and av
            and all(
                (kind is c.LITERAL and value > 127) or (kind is c.RANGE and value[0] > 127)
                for kind, value in av
            )
        ):
            return True
        if op is c.SUBPATTERN and _required_non_ascii(list(av[-1])):
            return True
        if op is c.BRANCH and all(_required_non_ascii(list(b)) for b in av[1]):
            return True
        repeats = op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)
        if repeats and av[0] >= 1 and _required_non_ascii(list(av[2])):
            return True
    return False


def is_cjk(ch: str) -> bool:
    return bool(CJK.match(ch))


def _phrase(phrase: str) -> str:
    body = r"\s+".join(re.escape(word) for word in phrase.split())
    head = r"(?<![a-z0-9])" if phrase[0].isascii() and phrase[0].isalnum() else ""
    tail = r"(?![a-z0-9])" if phrase[-1].isascii() and phrase[-1].isalnum() else ""
    return head + body + tail


def phrase_source(phrases: Iterable[str]) -> str:
    """A regex that matches any of ``phrases`` (the longest where several start at one
    place), with word boundaries for ASCII. Built as a trie: phrases that share a start
    share its pattern, so a list of cues with their suffixes ("order number is", "order
    number was", ...) compiles in a fraction of the time of a flat alternation."""
    trie: dict[str, Any] = {}
    for phrase in {" ".join(fold(p).split()) for p in phrases}:
        if not phrase:
            continue
        node = trie
        for ch in phrase:
            node = node.setdefault(ch, {})
        node[_END] = phrase
    return _branches(trie, root=True)


_END = ""
"""The key that marks, in a trie node, the end of a phrase."""


def _branches(node: dict[str, Any], *, root: bool = False, last: str = "") -> str:
    """The pattern of one trie node: its children (longer phrases) before its own end, so a
    greedy match finds the longest phrase, as the longest-first alternation did."""
    options = []
    for ch in sorted(k for k in node if k != _END):
        head = r"(?<![a-z0-9])" if root and ch.isascii() and ch.isalnum() else ""
        step = r"\s+" if ch == " " else re.escape(ch)
        options.append(head + step + _branches(node[ch], last=ch))
    if _END in node:
        options.append(r"(?![a-z0-9])" if last.isascii() and last.isalnum() else "")
    if len(options) == 1:
        return options[0]
    return "(?:" + "|".join(options) + ")"


def phrases(items: Iterable[str]) -> re.Pattern[str]:
    """Compile ``items`` into one pattern that matches any of them in folded text (built
    once per set of items: a template's choices are matched on every turn)."""
    return _compiled(frozenset(items))


@functools.lru_cache(maxsize=1024)
def _compiled(items: frozenset[str]) -> re.Pattern[str]:
    source = phrase_source(items)
    return re.compile(source) if source else NEVER


def overlaps(start: int, end: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in spans)


def strip_punct(text: str) -> str:
    return text.strip(" \t\r\n" + CLAUSE_END + ".'-")


def wordlist(text: str, sep: str | None = None) -> list[str]:
    """Split a vocabulary block into its entries (``sep`` between them, else whitespace)."""
    return [w.strip() for w in text.split(sep) if w.strip()]
