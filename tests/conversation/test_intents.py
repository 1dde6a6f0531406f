"""Yes, no, control words, corrections, questions and language, in both languages."""

from __future__ import annotations

import pytest

from relaystate.conversation import (
    control_word,
    detect_language,
    is_correction,
    is_no,
    is_question,
    is_yes,
)

YES = [
    "yes",
    "Yes.",
    "YES!",
    "yes please",
    "yeah",
    "yep",
    "ok",
    "OK",
    "okay",
    "sure",
    "confirm",
    "Confirmed",
    "correct",
    "that's correct",
    "that’s right",
    "right",
    "go ahead",
    "yes, book it",
    "sounds good, thanks",
    "absolutely",
    "no problem",
    "yes, the 9am flight is fine",
    "对",
    "对的",
    "对，没错",
    "好",
    "好的",
    "好的，谢谢",
    "是",
    "是的",
    "确认",
    "确定",
    "没问题",
    "可以",
    "可以的",
    "行",
    "嗯嗯",
    "没错",
    "好的，订吧",
    "对，就这样",
    "ＯＫ",
]
NOT_YES = [
    "",
    "no",
    "nope",
    "yesterday",
    "okayish",
    "yes but make it business",
    "sure, but change the date",
    "ok, actually make it Friday",
    "ok?",
    "is it ok?",
    "可以吗？",
    "好吗",
    "是北京",
    "好贵啊",
    "对不起",
    "不对",
    "不是",
    "好的，不过改成商务舱",
    "确认一下，是明天吗",
    "取消",
    "ok, cancel it",
    "好的，继续",
    "Beijing",
]
NO = [
    "no",
    "No.",
    "nope",
    "nah",
    "no, make it business",
    "No, Shanghai",
    "wrong",
    "that's wrong",
    "not really",
    "incorrect",
    "不",
    "不，改成商务舱",
    "不对",
    "不对，是后天",
    "不是",
    "不是北京是上海",
    "不行",
    "不要",
    "错了",
    "嗯，不对",
]
NOT_NO = [
    "",
    "yes",
    "ok",
    "no problem",
    "no worries",
    "not bad",
    "nothing",
    "nobody",
    "没问题",
    "没错",
    "不错",
    "不客气",
    "取消",
    "不要了",
    "算了",
    "no, cancel it",
    "不用了",
    "Norway",
    "上海",
]


@pytest.mark.parametrize("text", YES)
def test_yes(text: str) -> None:
    assert is_yes(text)


@pytest.mark.parametrize("text", NOT_YES)
def test_not_yes(text: str) -> None:
    assert not is_yes(text)


@pytest.mark.parametrize("text", NO)
def test_no(text: str) -> None:
    assert is_no(text)


@pytest.mark.parametrize("text", NOT_NO)
def test_not_no(text: str) -> None:
    assert not is_no(text)


@pytest.mark.parametrize("text", YES + NO)
def test_yes_and_no_never_both(text: str) -> None:
    assert not (is_yes(text) and is_no(text))


CONTROL = [
    ("取消", "cancel"),
    ("取消吧", "cancel"),
    ("算了", "cancel"),
    ("算了，不订了", "cancel"),
    ("不要了", "cancel"),
    ("那就不用了，谢谢", "cancel"),
    ("把订单取消掉", "cancel"),
    ("cancel", "cancel"),
    ("Cancel it please", "cancel"),
    ("cancel the booking", "cancel"),
    ("forget it", "cancel"),
    ("never mind", "cancel"),
    ("stop", "cancel"),
    ("no, cancel it", "cancel"),
    ("暂停", "pause"),
    ("等一下", "pause"),
    ("等等", "pause"),
    ("稍等", "pause"),
    ("先等一下", "pause"),
    ("回头再说吧", "pause"),
    ("pause", "pause"),
    ("later", "pause"),
    ("maybe later", "pause"),
    ("I'll do it later", "pause"),
    ("hold on", "pause"),
    ("hold on a sec", "pause"),
    ("wait", "pause"),
    ("继续", "continue"),
    ("继续吧", "continue"),
    ("我们继续", "continue"),
    ("接着", "continue"),
    ("接着说", "continue"),
    ("刚才说到哪了？", "continue"),
    ("continue", "continue"),
    ("let's continue", "continue"),
    ("go on", "continue"),
    ("where were we", "continue"),
    ("OK, where were we?", "continue"),
    ("resume", "continue"),
    ("resume the booking", "continue"),
    ("好的，继续", "continue"),
]
NOT_CONTROL = [
    "",
    "ok",
    "yes",
    "no",
    "不",
    "取消订单ORD-12345",
    "cancel order ORD-12345",
    "a non-stop flight",
    "a later flight",
    "wait, make it business",
    "继续飞上海",
    "I want to stop in Dubai",
    "明天",
    "how do I cancel?",
    "不对",
]


@pytest.mark.parametrize(("text", "word"), CONTROL)
def test_control_words(text: str, word: str) -> None:
    assert control_word(text) == word


@pytest.mark.parametrize("text", NOT_CONTROL)
def test_not_control_words(text: str) -> None:
    assert control_word(text) is None


def test_cancel_is_not_no() -> None:
    for text in ("取消", "cancel", "算了", "不要了"):
        assert control_word(text) == "cancel"
        assert not is_no(text) and not is_yes(text)


CORRECTIONS = [
    "actually make it business class",
    "Actually, Friday",
    "change it to Friday",
    "change the date to next Friday",
    "make it two",
    "business instead",
    "I meant Shanghai",
    "no, Shanghai",
    "not economy, business",
    "not tomorrow but Friday",
    "sorry, Li Lei",
    "改成商务舱",
    "改为明天",
    "换成头等舱",
    "不对，是后天",
    "不是经济舱，是商务舱",
    "不是北京是上海",
    "其实是明天",
    "日期应该是下周三",
    "我是说上海",
    "说错了，是李雷",
]
NOT_CORRECTIONS = [
    "business class",
    "商务舱",
    "no",
    "不对劲",
    "from Beijing to Shanghai",
    "明天从北京出发",
    "yes",
    "I want business",
]


@pytest.mark.parametrize("text", CORRECTIONS)
def test_corrections(text: str) -> None:
    assert is_correction(text)


@pytest.mark.parametrize("text", NOT_CORRECTIONS)
def test_not_corrections(text: str) -> None:
    assert not is_correction(text)


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("what's the weather tomorrow?", True),
        ("How much is it", True),
        ("明天天气怎么样", True),
        ("可以吗", True),
        ("多少钱", True),
        ("Shanghai?", True),
        ("Shanghai", False),
        ("May 5th", False),
        ("Will Smith", False),
        ("do it", False),
        ("明天", False),
        ("我叫李雷", False),
    ],
)
def test_questions(text: str, question: bool) -> None:
    assert is_question(text) is question


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("明天去上海", "zh"),
        ("我要退款ORD-12345", "zh"),
        ("我要 business class", "zh"),
        ("改成商务舱", "zh"),
        ("book a flight to Shanghai", "en"),
        ("Book me a 商务舱 seat to Beijing please", "en"),
        ("ORD-12345 please", "en"),
        ("yes", "en"),
        ("好", "zh"),
        ("", "en"),
        ("12345", "en"),
        ("？？", "en"),
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_detect_language_default() -> None:
    assert detect_language("123", default="zh") == "zh"
