"""Cities people fly between, by their English and Chinese names and airport codes.

The data (``data/places.tsv``) is built from airportsdata and GeoNames by
``tools/build_places.py``; it is read once, the first time a place is looked up. A place is
stored under its own name in the script the user wrote it in (上海, Shanghai), and an airport
code (PVG) under the city's name in the language of the conversation.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from .text import fold, is_cjk

_LATIN_WORD = re.compile(r"[a-z][a-z'.\-]*")
_CODE = re.compile(r"[A-Z]{3}")
_DATA = Path(__file__).with_name("data") / "places.tsv"
_NEAR_CUTOFF = 88.0
"""The lowest rapidfuzz ratio (0-100) for a typed name to be read as a city's name."""
_NEAR_LENGTH = 6
"""Shorter names are too easily another word or another city (Rome, Nice, Bath)."""


@dataclass(frozen=True)
class Place:
    """A city: its English name, its Chinese name (if known), airport codes, country."""

    en: str
    zh: str | None
    codes: tuple[str, ...]
    country: str

    def name(self, language: str) -> str:
        return self.zh if language == "zh" and self.zh else self.en


@dataclass(frozen=True)
class Gazetteer:
    names: dict[str, Place]
    """Folded name (English or Chinese) -> its city (the most populous, when shared)."""
    spelled: dict[str, str]
    """Folded name -> how the data spells it ("new york" -> "New York")."""
    aliases: frozenset[str]
    """Folded short names and nicknames (NYC, 魔都, Heathrow), stored as the city's name."""
    codes: dict[str, Place]
    longest_zh: int
    longest_en: int
    latin: tuple[list[str], ...] = ()
    """Folded Latin names (no aliases or codes) by their number of words."""

    def code(self, token: str) -> Place | None:
        """The city an airport or city code names ("PEK", "SHA"), if the token is one."""
        return self.codes.get(token) if _CODE.fullmatch(token) else None

    def at(self, text: str, pos: int) -> tuple[Place, int] | None:
        """The longest city name starting at ``text[pos]`` and where it ends."""
        folded = fold(text)
        if pos >= len(text):
            return None
        if is_cjk(text[pos]):
            for n in range(min(self.longest_zh, len(text) - pos), 1, -1):
                place = self.names.get(folded[pos : pos + n])
                if place is not None:
                    return place, pos + n
            return None
        words: list[re.Match[str]] = []
        for m in _LATIN_WORD.finditer(folded, pos):
            if (words and folded[words[-1].end() : m.start()].strip()) or (
                not words and m.start() != pos
            ):
                break
            words.append(m)
            if len(words) >= self.longest_en:
                break
        for n in range(len(words), 0, -1):
            end = words[n - 1].end()
            place = self.names.get(folded[pos:end].rstrip(".'"))
            if place is not None:
                return place, pos + len(folded[pos:end].rstrip(".'"))
        return None

    def near(self, text: str, pos: int, stop: int) -> tuple[str, int] | None:
        """A city name typed with a slip ("san fransisco", "Chicgo") starting at
        ``text[pos]``: the name as the data spells it and where the typed words end."""
        from rapidfuzz import fuzz, process

        folded = fold(text)
        words = list(_LATIN_WORD.finditer(folded, pos, stop))
        words = [w for i, w in enumerate(words) if i < 3]
        if not words or words[0].start() != pos:
            return None
        for size in range(len(words), 0, -1):
            run = words[:size]
            if any(folded[a.end() : b.start()].strip() for a, b in itertools.pairwise(run)):
                continue
            typed = folded[pos : run[-1].end()].rstrip(".'")
            if len(typed.replace(" ", "")) < _NEAR_LENGTH or typed in self.names:
                continue
            best = process.extract(typed, self.by_words(size), scorer=fuzz.ratio, limit=2)
            if not best or best[0][1] < _NEAR_CUTOFF:
                continue
            if len(best) > 1 and best[0][1] - best[1][1] < 3:
                continue  # two cities about as close: no guess
            name = best[0][0]
            return self.spelled.get(name, name), pos + len(typed)
        return None

    def by_words(self, size: int) -> list[str]:
        """The Latin names of ``size`` words (for a fuzzy look-up)."""
        return self.latin[size] if size < len(self.latin) else []

    def before(self, text: str, end: int) -> tuple[Place, int] | None:
        """The longest city name ending at ``text[end]`` and where it starts."""
        folded = fold(text)
        for n in range(min(max(self.longest_zh, 30), end), 1, -1):
            start = end - n
            place = self.names.get(folded[start:end])
            if place is not None and (
                not folded[start].isalpha()
                or start == 0
                or not folded[start - 1].isalpha()
                or is_cjk(folded[start])
            ):
                return place, start
        return None


@functools.cache
def gazetteer() -> Gazetteer:
    """The cities, read from the package's data file on first use."""
    names: dict[str, Place] = {}
    spelled: dict[str, str] = {}
    codes: dict[str, Place] = {}
    aliases: set[str] = set()
    text = _DATA.read_text("utf-8")
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        en_names, zh_names, code_list, country, _population = line.split("\t")
        # Chinese names fold to themselves (no case, no full-width forms in the data)
        folded_line = en_names.lower() if en_names.isascii() else fold(en_names)
        folded_line += "\t" + zh_names
        english = en_names.split("|")
        chinese = [n for n in zh_names.split("|") if n]
        place = Place(
            english[0], chinese[0] if chinese else None, tuple(code_list.split("|")), country
        )
        keys = [k for k in "|".join(folded_line.split("\t")[:2]).split("|") if k]
        for name, key in zip([*english, *chinese], keys, strict=True):
            if key.startswith("~"):
                name, key = name[1:], key[1:]
                aliases.add(key)
            names.setdefault(key, place)
            if key != name:
                spelled.setdefault(key, name)
        for code in place.codes:
            codes.setdefault(code, place)
    longest_zh = max((len(n) for n in names if is_cjk(n[0])), default=2)
    longest_en = max((len(n.split()) for n in names if not is_cjk(n[0])), default=1)
    latin: list[list[str]] = [[] for _ in range(longest_en + 1)]
    for key in names:
        if key.isascii() and key not in aliases and len(key) >= _NEAR_LENGTH:
            latin[len(key.split())].append(key)
    return Gazetteer(
        names, spelled, frozenset(aliases), codes, longest_zh, longest_en, tuple(latin)
    )


PROVINCES = frozenset(
    [
        "黑龙江",
        "内蒙古",
        "广东",
        "广西",
        "云南",
        "贵州",
        "四川",
        "湖南",
        "湖北",
        "河南",
        "河北",
        "山东",
        "山西",
        "陕西",
        "甘肃",
        "青海",
        "江苏",
        "浙江",
        "安徽",
        "福建",
        "江西",
        "辽宁",
        "吉林",
        "宁夏",
        "新疆",
        "西藏",
        "海南",
        "台湾",
    ]
)
_PROVINCE = re.compile(
    rf"^(?:{'|'.join(sorted(PROVINCES, key=len, reverse=True))})"
    r"(?:省|自治区|壮族自治区|回族自治区)?"
)


def without_province(value: str) -> str:
    """云南昆明, 广东省深圳市 -> 昆明, 深圳市: a province said before a known city is where
    the city is, not part of its name."""
    m = _PROVINCE.match(value)
    if m and m.end() < len(value):
        rest = value[m.end() :]
        if rest in gazetteer().names or rest.removesuffix("市") in gazetteer().names:
            return rest
    return value


def canonical(value: str, language: str) -> str:
    """A place as stored: a city as the user named it, spelled as the data spells that name
    ("new york" -> "New York", "上海市" -> "上海市"); a code or an alias as the city's name in
    ``language`` ("PEK" -> "Beijing" or 北京, 魔都 -> 上海); anything unknown as written."""
    found = gazetteer()
    stripped = without_province(value.strip())
    place = found.code(stripped)
    if place is None and fold(stripped) in found.aliases:
        place = found.names[fold(stripped)]
    if place is not None:
        return place.name(language)
    key = fold(stripped)
    if key not in found.names and stripped.isascii():
        near = found.near(stripped, 0, len(stripped))
        if near is not None and near[1] == len(stripped):
            return near[0]  # "san fransisco" -> "San Francisco"
    return found.spelled.get(key, stripped)


def in_language(value: str, language: str) -> str:
    """A stored place as a reply in ``language`` shows it: a known city by its name in that
    language when the value is in the other script (Dubai -> 迪拜, 上海 -> Shanghai), else as
    stored."""
    stripped = value.strip()
    latin = stripped.isascii()
    if (language == "zh") != latin:
        return value  # already in the reply's script
    found = gazetteer()
    place = found.code(stripped) or found.names.get(fold(stripped))
    return place.name(language) if place is not None else value
