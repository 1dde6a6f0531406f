"""What a category word covers, from WordNet's nouns: "cities" -> Rome, Paris; "European
countries" -> Spain, England; "martial arts" -> taekwondo; "desserts" -> sundae.

A question that asks for the members of a category ("Which cities has Jon visited?") shares
no word with the turns that answer it ("We loved Rome!"), and neither keyword search nor a
small embedder links the two (LoCoMo dev: the turns of such questions are scored low by every
other signal). WordNet files members under their category (hyponyms and instances), so a
type lexicon links them with no model. It is read in place from Debian's ``wordnet-base``
(``/usr/share/wordnet``, or ``RELAYSTATE_WORDNET``): the index by binary search, a synset by
its byte offset, both through ``mmap``, so nothing is loaded or parsed ahead and a process
pays only the pages its questions touch. Without WordNet recall simply goes without it.
"""

from __future__ import annotations

import mmap
import os
import threading
from functools import lru_cache
from pathlib import Path

PLACES = ("/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/WordNet-3.0/dict")
CACHED = 4096
"""Categories whose members a lexicon remembers."""
HYPONYMS = (b"~", b"~i")
"""Links down to members: hyponyms (dessert -> sundae) and instances (city -> Rome)."""
NOUN_ENDINGS = (
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("s", ""),
)
"""WordNet's own detachment rules for nouns (its ``morphy``), tried in order."""


class Lexicon:
    """WordNet's nouns: a word's lemma and the lemmas filed under it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._index = _mapped(root / "index.noun")
        self._data = _mapped(root / "data.noun")
        self._exceptions = _exceptions(root / "noun.exc")
        self._lock = threading.Lock()  # one reader at a time per map (seek + readline)
        self._members: dict[tuple[str, int, int, int], frozenset[str] | None] = {}

    @classmethod
    def find(cls) -> Lexicon | None:
        """WordNet where ``RELAYSTATE_WORDNET`` or a usual place has it; None when absent."""
        return _found(os.environ.get("RELAYSTATE_WORDNET", ""))

    def lemma(self, word: str) -> str | None:
        """The noun ``word`` is a form of ("cities" -> "city"), or None if WordNet has none."""
        word = word.casefold().replace(" ", "_")
        if self._offsets(word):
            return word
        base = self._exceptions.get(word)
        if base is not None:
            return base
        for end, put in NOUN_ENDINGS:
            if word.endswith(end) and self._offsets(word[: len(word) - len(end)] + put):
                return word[: len(word) - len(end)] + put
        return None

    def members(
        self, lemma: str, *, senses: int = 1, depth: int = 6, limit: int = 2000
    ) -> frozenset[str] | None:
        """Lemmas filed under the first ``senses`` senses of ``lemma`` within ``depth`` links
        (multi-word ones with spaces); None when they pass ``limit``: a word that broad
        ("thing", "activity") names no category worth looking for. Remembered (a few
        thousand categories): a broad word costs ~4 ms to walk, questions repeat them."""
        key = (lemma, senses, depth, limit)
        if key not in self._members:
            if len(self._members) >= CACHED:
                self._members.clear()
            self._members[key] = self._walk(lemma, senses, depth, limit)
        return self._members[key]

    def _walk(self, lemma: str, senses: int, depth: int, limit: int) -> frozenset[str] | None:
        found: set[str] = set()
        seen: set[int] = set()
        front = list(self._offsets(lemma)[:senses])
        for _ in range(depth):
            below: list[int] = []
            for offset in front:
                if offset in seen:
                    continue
                seen.add(offset)
                words, links = self._synset(offset)
                found.update(words)
                below += links
                if len(found) > limit:
                    return None
            front = below
        found.discard(lemma.replace("_", " "))
        return frozenset(found)

    def _offsets(self, lemma: str) -> list[int]:
        line = self._lookup(lemma.encode())
        if line is None:
            return []
        fields = line.split()
        synsets, pointers = int(fields[2]), int(fields[3])
        start = 4 + pointers + 2
        return [int(f) for f in fields[start : start + synsets]]

    def _lookup(self, key: bytes) -> bytes | None:
        """The index line of ``key`` (the file is sorted by its first field)."""
        m = self._index
        lo, hi = 0, len(m)
        with self._lock:
            while lo < hi:
                mid = (lo + hi) // 2
                start = m.rfind(b"\n", 0, mid) + 1
                end = m.find(b"\n", start)
                end = len(m) if end < 0 else end
                line = m[start:end]
                if line.startswith(b" "):  # the licence at the top sorts before every lemma
                    lo = end + 1
                    continue
                head = line.split(b" ", 1)[0]
                if head == key:
                    return line
                if head < key:
                    lo = end + 1
                else:
                    hi = start
        return None

    def _synset(self, offset: int) -> tuple[list[str], list[int]]:
        """A synset's words and the offsets of its members (the offset is its byte position)."""
        with self._lock:
            end = self._data.find(b"\n", offset)
            line = self._data[offset : end if end >= 0 else len(self._data)]
        fields = line.split(b" | ", 1)[0].split()
        count = int(fields[3], 16)
        words = [
            fields[4 + 2 * i].decode("latin-1").casefold().replace("_", " ").split("(")[0]
            for i in range(count)
        ]
        at = 4 + 2 * count
        links = []
        for n in range(int(fields[at])):
            symbol, target, pos = fields[at + 1 + 4 * n : at + 4 + 4 * n]
            if symbol in HYPONYMS and pos == b"n":
                links.append(int(target))
        return words, links


@lru_cache(maxsize=4)
def _found(configured: str) -> Lexicon | None:
    for place in (configured,) if configured else PLACES:
        root = Path(place)
        if (root / "index.noun").is_file() and (root / "data.noun").is_file():
            return Lexicon(root)
    return None


def _mapped(path: Path) -> mmap.mmap:
    with path.open("rb") as file:
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _exceptions(path: Path) -> dict[str, str]:
    """Irregular plurals ("children child"); an absent file means none."""
    if not path.is_file():
        return {}
    pairs = (line.split() for line in path.read_text(encoding="latin-1").splitlines())
    return {p[0]: p[1] for p in pairs if len(p) >= 2}
