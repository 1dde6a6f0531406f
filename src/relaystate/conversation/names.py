"""People's names in free phrasing: "病人叫刘洋", "名字写李婷", "姓李", "王先生", "under Garcia",
"booked under the name of Ana Ruiz".

A Chinese name is a surname (the common single and double ones) and one or two characters;
said after 叫, 名字是/写, 姓名 or a role (病人, 乘客...), or as surname + title (王先生), or a
surname alone (姓李: the surname is all that was given, and all that is kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚"
    "邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左"
    "柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈"
    "饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵"
    "苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)
"""The common Chinese surnames (about 300, by frequency), one character each."""
DOUBLE_SURNAMES = (
    "欧阳",
    "司马",
    "诸葛",
    "上官",
    "东方",
    "慕容",
    "令狐",
    "皇甫",
    "夏侯",
    "尉迟",
    "公孙",
    "长孙",
    "宇文",
    "司徒",
    "端木",
    "独孤",
    "南宫",
    "西门",
    "申屠",
    "轩辕",
)

_HAN = r"[^\W\d_a-zA-Z]"
"""A letter outside ASCII: here, a Chinese character. It compiles in 0.06 ms where
[\u4e00-\u9fff] takes 0.5 ms per use (sre maps the range one character at a time), and
what it lets through is checked after the match."""
_SURNAME = "(?:" + "|".join(DOUBLE_SURNAMES) + "|" + _HAN + ")"
"""Where a surname stands; whether it is one is checked after the match (:func:`_surnamed`):
a class of 300 characters in four patterns cost 5 ms to compile, on the first turn."""
_GIVEN = rf"{_HAN}{{1,2}}"
_NAME = rf"(?P<name>{_SURNAME}{_GIVEN})(?!{_HAN}{{0,1}}(?:先生|女士|小姐))"
_ROLE = (
    r"名字|姓名|名|就诊人|病人|患者|孩子|儿子|女儿|入住人|联系人|会员|主人|驾驶人|司机|购票人|乘机人|"
    r"乘客|收件人|寄件人|客人|顾客|预订人|订票人|用户"
)
_SAID = re.compile(
    rf"(?:(?:{_ROLE})\s*(?:叫做|叫|是|为|写成|写的是|写|填|：|:)|(?<!{_HAN})(?:叫做|叫)|"
    rf"(?:我|他|她)叫|(?:{_ROLE})\s*(?={_HAN}))\s*{_NAME}"
)
_TITLED = re.compile(rf"(?<!{_HAN})(?P<name>{_SURNAME}(?:先生|女士|小姐|太太|老师|医生))")
_SURNAME_ONLY = re.compile(rf"(?:我|他|她|本人)?姓(?P<name>{_SURNAME})(?!{_HAN}{{0,2}}(?:名|的))")
_UNDER = re.compile(
    r"(?<![a-z])(?:booked\s+|reserved\s+|put\s+it\s+)?under\s+(?:the\s+name\s+(?:of\s+)?|"
    r"(?:my\s+)?name\s+)?(?P<name>[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){0,3})"
)


@dataclass(frozen=True)
class NameCandidate:
    start: int
    end: int
    value: str


def scan_names(text: str) -> list[NameCandidate]:
    """The names said in ``text`` in the ways above, in order."""
    found: list[NameCandidate] = []
    for pattern in (_SAID, _TITLED, _SURNAME_ONLY, _UNDER):
        for m in pattern.finditer(text):
            start, end = m.span()
            if any(start < f.end and f.start < end for f in found):
                continue
            if pattern is not _UNDER and not _surnamed(m.group("name")):
                continue
            found.append(NameCandidate(start, end, m.group("name")))
    return sorted(found, key=lambda f: f.start)


def _surnamed(name: str) -> bool:
    """Whether ``name`` begins with a common surname (a double one, or one character)."""
    return name[:2] in DOUBLE_SURNAMES or name[:1] in _SINGLE


_SINGLE = frozenset(SURNAMES)


def looks_chinese_name(value: str) -> bool:
    """A surname and one or two characters (or a surname and a title)."""
    shaped = re.fullmatch(rf"{_SURNAME}(?:{_GIVEN}|先生|女士|小姐|太太)", value)
    return shaped is not None and _surnamed(value)
