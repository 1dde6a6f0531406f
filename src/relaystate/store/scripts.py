"""Traditional Chinese folded to Simplified, for matching only.

A memory written as 頭髮 and a question asking about 头发 are the same words; without a
fold their bigrams never meet. Index and query text both pass through :func:`fold` before
they become search terms (and hash-embedder features), so either script finds the other;
the stored text stays as written. OpenCC's ``t2s`` maps characters, with a phrase table
only where one Traditional character has several Simplified ones (乾隆 keeps 乾, 乾燥
becomes 干燥); it adds no regional vocabulary (``tw2sp`` would turn 計程車 into 出租车,
which a user writing either never asked for). Text with no Han character is returned as it
is, without loading OpenCC (about 10 ms to import, 2 ms to load its tables): English
memory and the CLI's start-up never pay for it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

FOLD = "t2s"
"""The OpenCC configuration (Traditional to Simplified, characters and their phrases)."""

_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
"""Han characters (unified, extensions, compatibility): the only ones ``t2s`` changes
(checked over every assigned code point: no kana, Hangul, Latin or punctuation moves)."""


class _Converter(Protocol):
    def convert(self, text: str) -> str: ...


_converter: _Converter | None = None
_lock = threading.Lock()


def _load() -> _Converter:
    global _converter
    with _lock:
        if _converter is None:
            import opencc  # the wheel carries its tables: nothing is downloaded

            _converter = opencc.OpenCC(FOLD)
        return _converter


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Han character (the only text :func:`fold` may change)."""
    return _HAN.search(text) is not None


def fold(text: str) -> str:
    """``text`` with Traditional Chinese characters as Simplified (about 1 µs a sentence);
    any other text, and Simplified, unchanged."""
    if not has_han(text):
        return text
    return (_converter or _load()).convert(text)


class _Unfolded:
    def convert(self, text: str) -> str:
        return text


@contextmanager
def unfolded() -> Iterator[None]:
    """The fold turned off for a while (tests and benchmarks: how a store indexed before
    it, and what it found); not thread-safe, not for serving."""
    global _converter
    saved, _converter = _converter, _Unfolded()
    try:
        yield
    finally:
        _converter = saved
