"""Small intents read by rules, in Chinese and English: yes, no, control words, corrections.

Check :func:`control_word` before :func:`is_yes`/:func:`is_no`: "不要了" and "no, cancel it"
are a cancel, and neither yes nor no answers them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .text import CJK, CLAUSE_END, LATIN_WORD, fold, phrases

YES = phrases(
    [
        "yes",
        "yeah",
        "yep",
        "yup",
        "ya",
        "y",
        "ok",
        "okay",
        "k",
        "sure",
        "sure thing",
        "confirm",
        "confirmed",
        "i confirm",
        "correct",
        "that's correct",
        "that is correct",
        "right",
        "that's right",
        "that is right",
        "all right",
        "alright",
        "exactly",
        "absolutely",
        "definitely",
        "of course",
        "go ahead",
        "do it",
        "book it",
        "sounds good",
        "looks good",
        "perfect",
        "great",
        "fine",
        "no problem",
        "no worries",
        "yes please",
        "please do",
        "affirmative",
        "对",
        "对的",
        "对对",
        "对啊",
        "是",
        "是的",
        "是啊",
        "好",
        "好的",
        "好啊",
        "好滴",
        "行",
        "行吧",
        "可以",
        "可以的",
        "确认",
        "确定",
        "没问题",
        "没错",
        "没毛病",
        "嗯",
        "嗯嗯",
        "恩",
        "订吧",
        "就这样",
        "就这么办",
        "办吧",
        "提交",
        "同意",
    ]
)
#: Yes words of one Chinese character must stand alone ("是北京" is not a yes).
_YES_SHORT = {"对", "是", "好", "行", "嗯", "恩"}
NO = phrases(
    [
        "no",
        "nope",
        "nah",
        "n",
        "not really",
        "not quite",
        "wrong",
        "that's wrong",
        "that is wrong",
        "incorrect",
        "not correct",
        "not right",
        "that's not right",
        "negative",
        "不",
        "不对",
        "不是",
        "不行",
        "不要",
        "不用",
        "不好",
        "不正确",
        "错了",
        "错",
        "有误",
        "否",
    ]
)
#: Phrases that start like a no but mean yes (or something else entirely).
_NOT_NO = phrases(
    [
        "no problem",
        "no worries",
        "not bad",
        "no doubt",
        "不错",
        "不用改",
        "不客气",
        "不会错",
        "没问题",
        "没错",
    ]
)
_NO_FILLER = phrases(["oh", "um", "uh", "hmm", "well", "嗯", "呃"])
_POLITE = phrases(
    [
        "please",
        "thanks",
        "thank you",
        "thx",
        "oh",
        "um",
        "uh",
        "hmm",
        "well",
        "and",
        "then",
        "谢谢",
        "谢谢你",
        "麻烦了",
        "请",
        "吧",
        "啊",
        "呀",
        "哦",
        "哈",
        "了",
        "的",
        "嘞",
        "呢",
    ]
)
_BUT = re.compile(
    r"(?<![a-z])(?:but|however|though|actually|change|instead|not|no|wait|don't|isn't|"
    r"wrong|except)(?![a-z])|n't|不|没|别|但|不过|可是|改|换|其实|等等|等一下|错|吗|\?"
)

CONTROL: Mapping[str, re.Pattern[str]] = {
    "cancel": phrases(
        [
            "cancel",
            "cancel it",
            "forget it",
            "forget about it",
            "never mind",
            "nevermind",
            "nvm",
            "scrap it",
            "scrap that",
            "don't bother",
            "stop",
            "abort",
            "quit",
            "drop it",
            "i changed my mind",
            "取消",
            "算了",
            "不要了",
            "不用了",
            "不订了",
            "不买了",
            "不退了",
            "不弄了",
            "不办了",
            "不去了",
            "别订了",
            "先别订了",
            "不订了吧",
            "不修了",
            "不换了",
            "不做了",
            "不飞了",
            "不寄了",
            "不查了",
            "不需要了",
            "放弃",
            "作罢",
        ]
    ),
    "pause": phrases(
        [
            "pause",
            "later",
            "hold on",
            "wait",
            "wait a moment",
            "wait a minute",
            "wait a second",
            "one moment",
            "one sec",
            "not now",
            "brb",
            "be right back",
            "暂停",
            "等一下",
            "等一等",
            "等等",
            "稍等",
            "等会",
            "等会儿",
            "回头再说",
            "以后再说",
            "晚点再说",
            "先这样",
        ]
    ),
    "continue": phrases(
        [
            "continue",
            "go on",
            "carry on",
            "resume",
            "where were we",
            "pick up where we left off",
            "back to it",
            "let's go on",
            "继续",
            "接着",
            "接着来",
            "接着说",
            "继续吧",
            "刚才说到哪了",
            "说到哪了",
            "我们说到哪",
            "回到刚才",
        ]
    ),
}
_CONTROL_FILLER = phrases(
    [
        "please",
        "ok",
        "okay",
        "oh",
        "um",
        "uh",
        "well",
        "just",
        "no",
        "let's",
        "let us",
        "can we",
        "could we",
        "can you",
        "could you",
        "i want to",
        "i'd like to",
        "i wanna",
        "we can",
        "i'll",
        "we'll",
        "do it",
        "do this",
        "talk",
        "it",
        "this",
        "that",
        "the",
        "my",
        "a",
        "booking",
        "order",
        "task",
        "request",
        "refund",
        "thing",
        "for now",
        "now",
        "then",
        "maybe",
        "actually",
        "thanks",
        "thank you",
        "sorry",
        "moment",
        "minute",
        "second",
        "sec",
        "bit",
        "with",
        "we",
        "were",
        "nah",
        "nope",
        "hmm",
        "唉",
        "哎",
        "哎呀",
        "那",
        "那就",
        "还是",
        "就",
        "先",
        "吧",
        "了",
        "啊",
        "呀",
        "哦",
        "嗯",
        "好",
        "好的",
        "这个",
        "那个",
        "一下",
        "请",
        "帮我",
        "把",
        "订单",
        "预订",
        "任务",
        "这事",
        "我们",
        "刚才",
        "刚才的",
        "我想",
        "我要",
        "麻烦",
        "谢谢",
        "说",
        "来",
        "掉",
        "呢",
        "哈",
    ]
)

REQUEST = phrases(
    [
        "want",
        "i want",
        "we want",
        "i need",
        "we need",
        "i would like",
        "we'd like",
        "wanna",
        "i'd like",
        "would like",
        "need",
        "can you",
        "could you",
        "can i",
        "please",
        "help me",
        "get me",
        "let me",
        "i'd love",
        "book",
        "schedule",
        "arrange",
        "set up",
        "reserve",
        "我要",
        "预约",
        "预订",
        "预定",
        "安排",
        "约个",
        "叫个",
        "定个",
        "订个",
        "我想",
        "想要",
        "帮我",
        "给我",
        "麻烦",
        "请",
        "需要",
        "能不能",
        "可以帮",
        "申请",
        "办理",
        "订",
    ]
)
"""Words that ask for something ("I want", "book", "帮我", "麻烦"): a request, not an answer."""

_CORRECTION = re.compile(
    r"(?<![a-z])(?:actually|instead|rather|correction|scratch that|i meant|i mean|"
    r"(?:change|switch|update|set)\s+(?:(?:it|that|this)\s+|(?:the|my)\s+[a-z]+(?:\s+[a-z]+)?\s+)?to|"
    r"(?:change|switch)\s+[\w'-]+(?:\s+[\w'-]+)?\s+to|"
    r"not\s+[^,.;]+[,;]\s*(?:it'?s|it\s+is|but|rather)|"
    r"make\s+(?:it|that|this)|not\s+.+?\s+but|(?:is|was|are)\s+wrong)(?![a-z])|'s\s+wrong(?![a-z])"
    r"|^\s*(?:no|nope|nah|sorry|oops|wait)\b(?![\s,.!]+(?:problem|worries|doubt|thanks))"
    r"[\s,.!]+\S|^\s*(?:(?:hmm|um|uh|oh|well|wait|ok|okay|sorry|oops)[\s,.!]+)*"
    r"not\s+[^,]+,\s*\S"
    # a value taken back in the middle: "Friday, no, Saturday", "120, sorry, 150"
    r"|(?:[,;]|\.{2,}|…)\s*(?:(?:oh|er|erm|uh|um|hmm)\s+)?"
    r"(?:no|nope|wait|sorry|oops|i mean|or rather|make that)(?![a-z])"
    r"|(?:never\s*mind|on second thought)(?=[\s,.!]+\S)"
    r"|算了(?=[，,…\s]*[^\s，,…。.!！]+)|[，,…]+\s*还是|"
    r"改成|改为|改到|改一下|改下|换成|换为|换到|变成|不对(?!劲)|更正|应该是|我是说|我的意思是|"
    r"搞错了|说错了|打错了|写错了|填错了|弄错了|其实|更改|修改|不是.+?是|[哦噢啊呃额]\s*不[，,\s]|[，,]\s*不[，,]"
)
_QUESTION = re.compile(
    r"[?？]\s*$|吗\s*[?？。.!！]?\s*$|"
    r"^\s*(?:(?:wait|hmm|um|uh|so|and|oh|ok|okay|sorry|hey|btw)[\s,.!]+)*"
    r"(?:what|what's|how|where|when|who|why|which|can|could|would|is|are|does|did|"
    r"should|shall|do\s+(?:you|i|we|they))(?![a-z])|什么|怎么|为什么|为啥|干嘛|咋|哪里|哪儿|哪个|几点|多少|是不是|能不能|可不可以"
)


def _words(text: str) -> str:
    return " ".join(fold(text).split())


Token = tuple[str, int, int]


def _consume(text: str, groups: Mapping[str, re.Pattern[str]]) -> tuple[list[Token], int]:
    """Read ``text`` from the start as a run of known phrases: [(label, start, end)], and
    the index where reading stopped."""
    found: list[Token] = []
    pos = 0
    skip = " \t\r\n" + CLAUSE_END + ".'-"
    while True:
        while pos < len(text) and text[pos] in skip:
            pos += 1
        if pos >= len(text):
            return found, pos
        best: Token | None = None
        for label, pattern in groups.items():
            m = pattern.match(text, pos)
            if m and m.end() > pos and (best is None or m.end() > best[2]):
                best = (label, pos, m.end())
        if best is None:
            return found, pos
        found.append(best)
        pos = best[2]


def control_word(text: str) -> str | None:
    """ "cancel", "pause" or "continue" when the whole utterance is that control word (with
    fillers: "算了，不订了", "cancel the booking please", "ok, where were we?"), else None.

    A control word inside a request about something else ("cancel order ORD-10001", "a
    non-stop flight") is not one.
    """
    folded = _words(text)
    found, stop = _consume(folded, {**CONTROL, "filler": _CONTROL_FILLER})
    if stop < len(folded):
        return None
    labels = [label for label, _, _ in found if label != "filler"]
    return labels[-1] if labels else None


def is_yes(text: str, *, strict: bool = False) -> bool:
    """True when ``text`` says yes (yes/ok/sure/confirm/对/好的/是的/确认/没问题/可以...) and
    nothing after it takes that back ("yes but make it business" is not a yes).

    ``strict`` wants nothing but yes and politeness ("好的，谢谢" but not "对，北京")."""
    folded = _words(text)
    if not folded or control_word(text) is not None or _QUESTION.search(folded):
        return False
    found, stop = _consume(folded, {"yes": YES, "filler": _POLITE})
    if not any(label == "yes" for label, _, _ in found):
        return False
    if stop >= len(folded):
        return True
    if strict:
        return False
    label, start, end = found[-1]
    if (
        label == "yes"
        and end == stop
        and folded[start:end] in _YES_SHORT
        and CJK.match(folded[stop])
    ):
        return False  # 是北京, 好贵: a character of a sentence, not an answer
    return not _BUT.search(folded, stop)


def is_no(text: str) -> bool:
    """True when ``text`` starts with no (no/nope/wrong/不/不对/不是/错了...).

    "no, make it business" is a no (and a correction); "no problem" and "没错" are not;
    "取消" and "不要了" are control words (cancel), not no.
    """
    folded = _words(text)
    if not folded or control_word(text) is not None:
        return False
    _, stop = _consume(folded, {"filler": _NO_FILLER})
    if _NOT_NO.match(folded, stop):
        return False
    m = NO.match(folded, stop)
    if not m:
        return False
    word = m.group()
    rest = folded[m.end() :]
    if word == "不" and rest and CJK.match(rest[0]):
        return False  # 不错, 不客气... are not a no; 不，... is
    return word != "n" or not rest


def is_correction(text: str) -> bool:
    """True when ``text`` corrects an earlier answer: "actually", "make it", "instead",
    "change it to", "no, ...", "改成", "换成", "不对", "不是...是...", "其实"."""
    return bool(_CORRECTION.search(_words(text)))


def is_question(text: str) -> bool:
    """True when ``text`` asks something rather than answers ("?", 吗, what/how/什么...)."""
    return bool(_QUESTION.search(_words(text)))


def detect_language(text: str, default: str = "en") -> str:
    """ "zh" when Chinese characters are at least as many as Latin words, else "en"."""
    cjk = len(CJK.findall(text))
    latin = len(LATIN_WORD.findall(text))
    if cjk == 0 and latin == 0:
        return default
    return "zh" if cjk >= latin and cjk > 0 else "en"
