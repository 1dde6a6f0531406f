"""Numbers and amounts in both languages: "300", "1,200.50", "¥300", "$30.50", "30 dollars",
"300元", "三百", "两百五十块", "1.5万", "thirty-five dollars".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..inputs import MAX_SAFE_INTEGER
from .text import fold

CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
CN_UNITS = {"十": 10, "百": 100, "千": 1000}
CN_BIG = {"万": 10_000, "亿": 100_000_000}
CN_NUMERAL = "零〇一二两三四五六七八九十百千万亿"

EN_SMALL = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
EN_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}

_DIGITS = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s*([万千]|k(?![a-z])))?")
_CN = re.compile(rf"[{CN_NUMERAL}]+(?:点[零〇一二三四五六七八九]+)?")
_EN_WORD = re.compile(r"[a-z]+")
_PREFIX = re.compile(r"(?:[¥$€£]|(?<![a-z])(?:rmb|cny|usd|eur|gbp|us\$|hk\$))\s*$")
_JIAO = re.compile(r"([一二三四五六七八九1-9])(?:毛|角)?(?![\d零〇一二两三四五六七八九十百千万亿])")
_SUFFIX = re.compile(
    r"\s*(?:块钱|人民币|美元|美金|欧元|英镑|港币|元|块|圆)"
    r"|\s*(?:rmb|cny|yuan|usd|dollars?|bucks|eur|euros?|pounds?|quid)(?![a-z])"
)


@dataclass(frozen=True)
class NumberMatch:
    """A number in the text; ``currency`` when a currency sign or word is attached."""

    value: int | float
    start: int
    end: int
    currency: bool


def _tidy(value: float) -> int | float:
    value = round(value, 6)
    return int(value) if float(value).is_integer() else value


_CN_SPOKEN = "零一二三四五六七八九"
_ONE_AS_WORD = re.compile(r"[下直共起些点样定般旦切会致再向边面路同律概时旁瞬周看半]")
_FINANCIAL = str.maketrans(
    "壹贰貳叁參肆伍陆陸柒捌玖拾佰仟萬億兩", "一二二三三四五六六七八九十百千万亿两"
)
"""Banker's numerals (壹仟贰佰, written on cheques and receipts) as the everyday ones."""
_CN_RANGE = re.compile(r"([一二两三四五六七八九])([二两三四五六七八九])(?=[十百千万])")
"""两三百, 一两千: a guess between two numbers, not a number."""
_CENTS = re.compile(r"\s*(?:and\s+)?(?P<n>\d{1,2}|[a-z]+(?:[\s-][a-z]+)?)\s*(?:cents?|c)(?![a-z])")


def number_to_cn(n: int) -> str | None:
    """0-99 as Chinese numerals, as they are said: 8 -> 八, 14 -> 十四, 60 -> 六十, 15 -> 十五."""
    if not 0 <= n <= 99:
        return None
    tens, ones = divmod(n, 10)
    if not tens:
        return _CN_SPOKEN[ones]
    return ("" if tens == 1 else _CN_SPOKEN[tens]) + "十" + (_CN_SPOKEN[ones] if ones else "")


def cn_to_number(text: str) -> int | float | None:
    """Chinese numerals to a number: 三百 -> 300, 两百五十 -> 250, 三百五 -> 350, 一万二 -> 12000,
    三点五 -> 3.5, 二〇二七 -> 2027. None when ``text`` is not a numeral."""
    if not text:
        return None
    if "点" in text:
        whole, _, frac = text.partition("点")
        head = cn_to_number(whole) if whole else 0
        if head is None or not frac or any(ch not in CN_DIGITS for ch in frac):
            return None
        return _tidy(float(f"{int(head)}.{''.join(str(CN_DIGITS[c]) for c in frac)}"))
    if len(text) > 1 and all(ch in CN_DIGITS for ch in text):
        if len(text) > 16:  # more digits than any amount has (and int() refuses 4,300)
            return None
        return int("".join(str(CN_DIGITS[ch]) for ch in text))
    total = section = digit = 0
    last_unit = implied = 0
    after_unit = False
    seen = False
    for ch in text:
        if ch in CN_DIGITS:
            digit = CN_DIGITS[ch]
            # 三百五 (350), 两千五 (2500), 一万二 (12000): a final digit right after a unit
            # stands for the unit below it.
            implied = last_unit if after_unit and digit else 0
            after_unit = False
            seen = True
        elif ch in CN_UNITS:
            unit = CN_UNITS[ch]
            if digit == 0 and unit == 10:
                digit = 1
            section += digit * unit
            digit = implied = 0
            last_unit = unit
            after_unit = seen = True
        elif ch in CN_BIG:
            section += digit
            if section == 0:
                return None
            total += section * CN_BIG[ch]
            section = digit = implied = 0
            last_unit = CN_BIG[ch]
            after_unit = True
        else:
            return None
    if not seen:
        return None
    if implied >= 100:
        digit *= implied // 10
    return total + section + digit


def en_to_number(words: list[str]) -> int | None:
    """English number words to a number: ["two", "hundred", "fifty"] -> 250."""
    total = current = 0
    seen = False
    for word in words:
        if word in ("and", "a", "an"):
            continue
        if word in EN_SMALL:
            current += EN_SMALL[word]
            seen = True
        elif word == "hundred":
            current = max(current, 1) * 100
            seen = True
        elif word in EN_SCALES:
            total += max(current, 1) * EN_SCALES[word]
            current = 0
            seen = True
        else:
            return None
    return total + current if seen else None


def _english_runs(folded: str) -> list[tuple[int, int, int]]:
    """Runs of English number words: (start, end, value).

    Only the words that can be part of a run are read (number words, "a"/"an", "and"); any
    other word between two of them breaks the run exactly as it would if it were read.
    """
    runs: list[tuple[int, int, int]] = []
    words = _run_words(folded)
    i = 0
    while i < len(words):
        j = i
        parts: list[str] = []
        while j < len(words):
            start, _, word = words[j]
            if j > i and folded[words[j - 1][1] : start].strip(" -") != "":
                break
            next_word = words[j + 1][2] if j + 1 < len(words) else ""
            number = word in EN_SMALL or word in EN_SCALES
            article = word in ("a", "an") and not parts and next_word in EN_SCALES
            joiner = word == "and" and bool(parts) and next_word in EN_SMALL
            if not (number or article or joiner):
                break
            parts.append(word)
            j += 1
        value = en_to_number(parts) if parts else None
        if value is not None:
            runs.append((words[i][0], words[j - 1][1], value))
            i = j
        else:
            i += 1
    return runs


_RUN_WORD = re.compile(
    r"(?<![a-z])(?:"
    + "|".join(sorted({*EN_SMALL, *EN_SCALES, "a", "an", "and"}, key=lambda w: (-len(w), w)))
    + r")(?![a-z])"
)


def _run_words(folded: str) -> list[tuple[int, int, str]]:
    """The words that may belong to a run of number words, with a gap marker between two
    that other letters separate (a word that is not read)."""
    found: list[tuple[int, int, str]] = []
    last = 0
    for m in _RUN_WORD.finditer(folded):
        if found and _EN_WORD.search(folded, last, m.start()):
            found.append((last, last, "|"))  # some other word stood between: a break
        found.append((m.start(), m.end(), m.group()))
        last = m.end()
    return found


def _is_range(numeral: str) -> bool:
    """两三百, 三四十: two neighbouring digits before a unit give a rough range; so does
    百八十 ("a hundred or eighty")."""
    if re.match(r"[百千万][一二两三四五六七八九][十百千](?![一二三四五六七八九])", numeral):
        return True  # 百八十, 千八百: "a hundred or so"
    for m in _CN_RANGE.finditer(numeral):
        low, high = CN_DIGITS[m.group(1)], CN_DIGITS[m.group(2)]
        if high == low + 1:
            return True
    return False


def _cents(said: str) -> int | None:
    """The cents after an amount in dollars: "50", "fifty", "twenty-five"; None past 99."""
    value = int(said) if said.isdigit() else en_to_number(re.split(r"[\s-]+", said))
    return value if value is not None and 0 < value < 100 else None


def find_numbers(text: str) -> list[NumberMatch]:
    """Every number in ``text``, left to right, with any attached currency in its span.

    A number beyond 2**53 - 1 is not one: a float would not keep it exactly (400 digits
    would be inf), so it is skipped, and its digits are not read as anything else.
    """
    folded = fold(text)
    found: list[tuple[int, int, float]] = []
    # a Chinese comma ends a clause ("晚上7点，3位"): never a thousands separator
    view = "".join(";" if o == "，" else f for o, f in zip(text, folded, strict=True))
    for m in _DIGITS.finditer(view):
        start, end = m.start(), m.end()
        before = folded[start - 1] if start else ""
        after = folded[end] if end < len(folded) else ""
        if before.isalpha() and before.isascii() and not _PREFIX.search(folded[:start]):
            continue  # part of a code such as RS123
        negative = before == "-" and (start < 2 or not folded[start - 2].isalnum())
        if negative:
            before = folded[start - 2] if start >= 2 else ""
        clock = (before == ":" and folded[start - 2 : start - 1].isdigit()) or (
            after == ":" and folded[end + 1 : end + 2].isdigit()
        )
        glued = (
            clock
            or (before and before in "-#/")
            or (after and (after in "%/-" or (after.isascii() and after.isalpha())))
        )
        if glued and not _SUFFIX.match(folded, end):
            continue
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        unit = m.group(3)
        if unit:
            value *= {"万": 10_000, "千": 1000, "k": 1000}[unit]
        if negative:
            value, start = -value, start - 1
        found.append((start, end, value))
    cn_view = folded if folded.isascii() else folded.translate(_FINANCIAL)
    for m in () if folded.isascii() else _CN.finditer(cn_view):
        if not any(ch in "零〇一二两三四五六七八九十" for ch in m.group()):
            continue
        if _is_range(m.group()):
            continue
        if m.group() == "一" and _ONE_AS_WORD.match(cn_view, m.end()):
            continue  # 一下, 一直, 一共, 一起: a word, not the number one
        cn = cn_to_number(m.group())
        if cn is not None:
            found.append((m.start(), m.end(), float(cn)))
    for start, end, en in _english_runs(folded):
        found.append((start, end, float(en)))
    found.sort(key=lambda f: (f[0], -f[1]))
    result: list[NumberMatch] = []
    last_end = -1
    for start, end, value in found:
        if start < last_end:
            continue
        last_end = end
        currency = False
        prefix = _PREFIX.search(folded[:start])
        if prefix:
            start = prefix.start()
            currency = True
        suffix = _SUFFIX.match(folded, end)
        if suffix:
            end = suffix.end()
            currency = True
            jiao = _JIAO.match(folded, end)  # 二十五块五 = 25.5, 3块2毛 = 3.2
            if jiao and suffix.group().strip() in ("块", "元"):
                tenths = jiao.group(1)
                value += CN_DIGITS.get(tenths, 0) / 10 if tenths in CN_DIGITS else int(tenths) / 10
                end = jiao.end()
        dollars = (suffix and suffix.group().strip()[:1] in "db") or (
            prefix and prefix.group().strip() in ("$", "usd", "us$")
        )
        cents = _CENTS.match(folded, end) if dollars and float(value).is_integer() else None
        hundredths = _cents(cents["n"]) if cents else None
        if cents and hundredths is not None:  # "forty-five dollars and fifty cents"
            value += hundredths / 100
            end = cents.end()
        last_end = max(last_end, end)
        if not math.isfinite(value) or abs(value) > MAX_SAFE_INTEGER:
            continue  # a number that cannot be an amount (400 digits: inf) is no number
        result.append(NumberMatch(_tidy(value), start, end, currency))
    return result
