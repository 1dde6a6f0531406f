"""Street addresses wherever they are said: "55 Market Street", "221B Baker Street, London",
"10 Downing Street", "18 Rue Cler, apartment 4", "北京市朝阳区建国路88号",
"杭州西湖区文三路20号3单元".

An English address is a house number and capitalised words ending in a street word (or a
street word of French, Spanish, German...), then an apartment or a city after a comma; a
Chinese one is province, city and district names, a road and its number, then building,
unit and room.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STREET = (
    r"street|st|road|rd|avenue|ave|lane|ln|drive|dr|boulevard|blvd|way|place|pl|court|ct|"
    r"square|sq|terrace|close|crescent|highway|hwy|parkway|pkwy|row|alley|walk|circle|"
    r"gardens|mews|hill|park"
)
_EN = re.compile(
    rf"(?<![\w-])(?P<no>\d{{1,5}}[A-Za-z]?)\s+(?:(?:[A-Z][\w'.-]*|of|the|de|la|du)\s+){{0,3}}"
    rf"(?:[A-Z][\w'.-]*\s+(?:{_STREET})\.?(?![\w])|(?:rue|calle|via|avenida|strasse|straße)\s+"
    rf"(?:[A-Z][\w'.-]*\s*){{1,3}})"
    r"(?:,?\s*(?:apt|apartment|flat|unit|suite|floor|#)\.?\s*\w+)?",
    re.IGNORECASE,
)
_EN_CASED = re.compile(r"^\d{1,5}[A-Za-z]?\s+[A-Z]")
_ZH = re.compile(
    r"(?:[\u4e00-\u9fff]{2,6}?(?:省|自治区))?(?:[\u4e00-\u9fff]{2,6}?市)?"
    r"(?:[\u4e00-\u9fff]{2,6}?(?:区|县))?"
    r"[\u4e00-\u9fff\d]{1,12}?(?:路|街|大道|大街|巷|弄|胡同|道)"
    r"(?:[0-9一二三四五六七八九十百]{1,5}(?:号|號))"
    r"(?:[\u4e00-\u9fff\d\-]{0,12}?(?:栋|幢|座|楼|单元|室|层|号楼))*"
)
_ZH_LEAD = re.compile(r"^(?:地址是|地址为|地址|是|在|到|住在|寄件地址|取件地址|上门地址)")


@dataclass(frozen=True)
class AddressCandidate:
    start: int
    end: int
    value: str


def scan_addresses(text: str) -> list[AddressCandidate]:
    """Every street address of ``text``, in order."""
    found: list[AddressCandidate] = []
    for m in _EN.finditer(text):
        if not _EN_CASED.match(m.group()) and text.lower() != text:
            continue  # "3 nights in Paris": in a message with capitals, a street is capitalised
        found.append(AddressCandidate(m.start(), m.end(), m.group().strip()))
    for m in _ZH.finditer(text):
        start = m.start()
        lead = _ZH_LEAD.match(m.group())
        if lead:
            start += lead.end()
        found.append(AddressCandidate(start, m.end(), text[start : m.end()]))
    found.sort(key=lambda a: a.start)
    return found
