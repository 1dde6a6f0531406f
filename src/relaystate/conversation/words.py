"""The words extraction reads by, in Chinese and English: the cues that introduce a value
("from", "到", "my name is"), the words that end a place or a name, filler a speaker wraps an
answer in, and the words that show a number is not an amount. Kept apart from the rules of
:mod:`.extract` that use them, so that a list can be read and grown on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .text import phrases, wordlist

DEFAULT_CUES: Mapping[str, Mapping[str, Sequence[str]]] = {
    "person": {
        "en": [
            "my name is",
            "my name's",
            "her name is",
            "his name is",
            "their name is",
            "name is",
            "name's",
            "passenger is",
            "the passenger is",
            "passenger name is",
            "passenger's name is",
            "traveller is",
            "traveler is",
            "call me",
            "i'm called",
            "i am called",
            "i'm",
            "i am",
            "this is",
            "for",
            "it's",
            "it is",
        ],
        "zh": [
            "我叫",
            "我的名字是",
            "我的名字叫",
            "名字是",
            "名字叫",
            "姓名是",
            "姓名",
            "名叫",
            "乘机人是",
            "乘机人",
            "乘客是",
            "乘客",
            "旅客是",
            "旅客",
            "叫我",
            "她叫",
            "他叫",
            "她的名字是",
            "他的名字是",
            "叫做",
        ],
    },
    "order_id": {
        "en": ["order", "order number", "order no", "order id", "order #"],
        "zh": ["订单号", "订单编号", "订单", "单号"],
    },
    "amount": {
        "en": ["amount", "amount of", "refund", "refund of", "total", "total of", "cost", "costs"],
        "zh": ["金额", "退款金额", "退款", "退", "一共", "总共", "价格", "花了", "付了"],
    },
}


#: Cues of free-text slots that declare none, by what their name says they hold.
TEXT_ROLE_CUES: Mapping[str, Mapping[str, Sequence[str]]] = {
    "reason": {
        "en": ["because", "since", "the reason is", "reason is", "reason:", "reason being", "as"],
        "zh": ["因为", "原因是", "理由是", "原因：", "理由：", "由于"],
    },
    "symptoms": {
        "en": ["the problem is", "it keeps", "symptoms:"],
        "zh": ["症状是", "问题是", "毛病是"],
    },
}


#: Cues for place slots that declare none, by the role their name suggests.
ROLE_CUES: Mapping[str, Mapping[str, Sequence[str]]] = {
    "origin": {
        "en": ["from", "departing from", "leaving from", "flying from", "out of", "{} to"],
        "zh": ["从", "由", "出发地", "{}出发", "{}起飞", "{}到", "{}飞", "{}至"],
        "any": ["{}→", "{}->", "{}➔", "{}=>"],
    },
    "destination": {
        "en": [
            "to",
            "flying to",
            "going to",
            "heading to",
            "arriving in",
            "arriving at",
            "fly into",
            "flying into",
            "landing in",
            "landing at",
            "bound for",
        ],
        "zh": ["到", "去", "飞", "飞往", "前往", "目的地", "到达", "抵达", "回", "至"],
        "any": ["→", "->", "➔", "=>"],
    },
}


ORIGIN_NAMES = ("origin", "from", "departure", "depart", "source", "start")


DESTINATION_NAMES = ("destination", "dest", "to", "arrival", "arrive")


PLACE_NAMES = (*ORIGIN_NAMES, *DESTINATION_NAMES, "city", "place", "location", "where")


PERSON_NAMES = ("name", "passenger", "person", "traveller", "traveler", "customer", "contact")


#: Words that end a place or a name in English.
EN_STOP = frozenset(
    wordlist(
        """on at in for by with via and or but then to from into onto tomorrow today tonight
    please next this that these those the a an i i'm i'd i'll we you he she they it it's is
    are was were be been am would will can could should shall want wants need needs like
    fly flying flight flights go going travel travelling traveling leave leaving depart
    departing arrive arriving return returning book booking get ticket tickets class seat
    seats cabin around about early late morning afternoon evening night asap thanks thank
    instead actually rather not no yes as if so because since which who where when my your
    our their his her me us them now soon one two both also too ok okay economy business
    first date passenger name order refund check change confirm cancel know see ask make pay
    buy do have say tell find look talk speak stay meet visit help show give take use try
    start finish work call email send hi hello hey there dear sorry cheers regards good"""
    )
)


ADVERBS = frozenset(["first", "second", "last", "next", "standard", "normal"])
"""Choice words that can also open a sentence as an adverb ("First, I need...")."""


NAME_PARTICLES = frozenset(["de", "da", "del", "della", "di", "la", "le", "van", "von", "du", "el"])


NOT_BEFORE_ORIGIN = frozenset(["for", "with", "by", "and", "or", "is", "am", "are", "me", "us"])


EN_NAME_STOP = EN_STOP - {"will", "rather", "early", "late", "soon", "first", "may"}


ZH_PLACE_STOP = phrases(
    wordlist(
        """的 了 吧 呢 啊 吗 呀 哦 嘛 出发 起飞 飞机 机票 航班 票 坐 乘 要 想 订 买 帮 给 还有 然后
    再 在 是 我 你 他 她 出差 旅游 旅行 玩 开会 参加 看望 见 找 办事 上班 探亲 度假 一张 一个
    两张 舱 经济 商务 头等 谢谢 请 麻烦 可以 行吗 好吗 怎么 什么 那边 这边 附近 改 换 来 回"""
    )
)


ZH_NAME_STOP = phrases(
    wordlist(
        """的 了 吧 呢 啊 吗 呀 哦 嘛 要 想 订 买 去 到 从 飞 坐 乘 是 我 你 谢谢 请 麻烦 先生 女士
    小姐 和 跟 出发 机票 一张 在"""
    )
)


#: Chinese words that contain a cue character without being that cue.
BLOCKERS = phrases(
    wordlist(
        """飞机 起飞 飞行 收到 得到 找到 到底 到时 到时候 回来 回去 过去 出去 进去 上去 下去 从来
    从不 从没 去年 去过 到了吗 改签 签到"""
    )
)


#: Person cues that also start other sentences: their value must be capitalised.
WEAK_CUES = frozenset(["i'm", "i am", "this is", "for", "it's", "it is"])


AMOUNT_WORDS = frozenset(
    wordlist(
        """about around like maybe just only refund refunded is be me back for of total to make
    it that pay paid cost costs was approx approximately roughly say exactly want need get give
    return returned with at than and or but no not yes ok okay please then so um uh hmm well
    all the charge charged spent spend price amount sum i'd i think guess prefer rather instead
    actually us usd rmb cny eur gbp jpy hkd worth value valued"""
    )
)


AMOUNT_BEFORE = frozenset("退付花共计合是要为给了到约额价款费用收赔补返剩差就吧那个只才算值估概")
"""Chinese characters a number may follow straight on and still be an amount (退300)."""


FILLER_HEAD = phrases(
    wordlist(
        """it's|it is|its|it will be|it'll be|that's|that is|that would be|it should be|should be|
    i think|i guess|i'd say|let's say|say|um|uh|er|erm|hmm|well|so|oh|ok|okay|yes|yeah|sure|
    actually|please|make it|make that|change it to|change that to|change to|switch to|
    switch it to|instead|how about|what about|sorry|i meant|i mean|no|nope|wrong|
    the answer is|my answer is|i'm|i am|this is|call me|probably|maybe|just|and|but|
    是|就是|应该是|我是|嗯|嗯嗯|额|呃|哦|那个|那就|那么|就|改成|改为|换成|不对|其实|我想|
    我要|我想要|要|还是|好的|对|呀|啊|我说|我是说|我的意思是|是说|叫|那好吧|好吧|那好|行吧|那行|
    算了|写|填""",
        "|",
    )
)


FILLER_TAIL = phrases(
    wordlist(
        """please|thanks|thank you|instead|then|i think|i guess|maybe|probably|ok|okay|actually|
    i mean|thx|吧|啊|呀|哦|呢|嘛|哈|了|的|好了|就行|就好|谢谢|谢谢你|可以吗|行吗|好吗|
    就可以|哈哈|吧谢谢|先生|女士|小姐""",
        "|",
    )
)


FREE_HEAD = phrases(
    wordlist(
        "um|uh|er|erm|hmm|well|so|oh|ok|okay|嗯|嗯嗯|额|呃|哦|那个|那就|好吧|那好吧|等下|等一下|等等|"
        "wait|hold on",
        "|",
    )
)


POLITE_TAIL = phrases(["please", "thanks", "thank you", "thx", "谢谢", "谢谢你", "麻烦了"])


FALLBACK_STOP = phrases(
    wordlist(
        """i|you|we|me|my|don't|dont|not|know|want|need|think|sure|maybe|yet|is|are|am|was|can|
    could|would|should|what|why|how|idea|dunno|whatever|anything|anywhere|somewhere|
    我|你|不知道|没|想|还|吗|呢|什么|怎么|哪|为什么|随便|都行|不清楚|不确定""",
        "|",
    )
)


#: Words after an English choice word that show it is not the choice ("business trip").
NOT_CHOICE_NEXT = frozenset(
    wordlist(
        "trip trips meeting meetings travel purposes purpose reasons reason day days time "
        "times hour hours"
    )
)
ORDINAL_NOT_NEXT = frozenset(wordlist("of thing things"))
"""After an ordinal choice ("first", "second"), words that make it no choice: "first of
all", "first thing tomorrow" (while "a minor thing" still says minor)."""
ORDINALS = frozenset(wordlist("first second third last next"))


LEFTOVER_STOP = frozenset(
    wordlist(
        "a an the my for of to on in it its is please me i'd i i'm and so just about this that "
        "with from order number also too want need like can could would you get help some one "
        "another new again now then there here want wanna hi hello hey thanks thank ok okay "
        "yes sure do does did be been have has return give send back money refund refunded "
        "let us file make lodge raise submit open start book booking reserve"
    )
)
