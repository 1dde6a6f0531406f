"""Five more templates declared as a new user would, for the ``users3`` set: scored only,
first scored unseen (the engine's understanding of templates it has never met). Plain
declarations from the public API: a kind, a question, labels, a few triggers and synonyms;
no cues, no extractors."""

from __future__ import annotations

from agents2 import _template  # the same four stages and booking action as users2's

from relaystate import Slot, TaskTemplate


def train_ticket() -> TaskTemplate:
    return _template(
        "train_ticket",
        "issue_ticket",
        titles={"en": "train ticket", "zh": "火车票"},
        triggers={
            "en": ["train", "rail ticket", "by rail"],
            "zh": ["火车票", "高铁", "动车", "火车"],
        },
        slots=[
            Slot(
                "origin",
                kind="place",
                ask={"en": "Where are you leaving from?", "zh": "从哪里出发？"},
                labels={"en": "from", "zh": "出发地"},
            ),
            Slot(
                "destination",
                kind="place",
                ask={"en": "Where to?", "zh": "到哪里？"},
                labels={"en": "to", "zh": "目的地"},
            ),
            Slot(
                "travel_date",
                kind="date",
                ask={"en": "Which day do you travel?", "zh": "哪天出发？"},
                labels={"en": "date", "zh": "出发日期"},
            ),
            Slot(
                "passengers",
                kind="count",
                maximum=9,
                ask={"en": "How many passengers?", "zh": "几位乘客？"},
                labels={"zh": "人数"},
            ),
            Slot(
                "seat_class",
                choices=["standard", "first", "business", "sleeper"],
                synonyms={
                    "二等座": "standard",
                    "二等": "standard",
                    "second class": "standard",
                    "一等座": "first",
                    "一等": "first",
                    "first class": "first",
                    "商务座": "business",
                    "卧铺": "sleeper",
                    "sleeper berth": "sleeper",
                },
                ask={
                    "en": "Standard, first, business or sleeper?",
                    "zh": "二等座、一等座、商务座还是卧铺？",
                },
                labels={"en": "seat", "zh": "座位"},
            ),
        ],
    )


def airport_transfer() -> TaskTemplate:
    return _template(
        "airport_transfer",
        "dispatch_car",
        titles={"en": "airport transfer", "zh": "机场接送"},
        triggers={
            "en": [
                "airport transfer",
                "to the airport",
                "from the airport",
                "airport pickup",
                "cab",
            ],
            "zh": ["接机", "送机", "机场接送", "叫车"],
        },
        slots=[
            Slot(
                "transfer_type",
                choices=["pickup", "dropoff"],
                synonyms={
                    "接机": "pickup",
                    "from the airport": "pickup",
                    "pick-up": "pickup",
                    "送机": "dropoff",
                    "to the airport": "dropoff",
                    "drop-off": "dropoff",
                },
                ask={
                    "en": "Pickup from the airport, or a drop-off to it?",
                    "zh": "接机还是送机？",
                },
                labels={"en": "transfer", "zh": "类型"},
            ),
            Slot(
                "city",
                kind="place",
                ask={"en": "Which city's airport?", "zh": "哪个城市的机场？"},
                labels={"zh": "城市"},
            ),
            Slot(
                "ride_date",
                kind="date",
                ask={"en": "Which day?", "zh": "哪天？"},
                labels={"en": "date", "zh": "日期"},
            ),
            Slot(
                "ride_time",
                kind="time",
                ask={"en": "What time should the driver be there?", "zh": "司机几点到？"},
                labels={"en": "time", "zh": "用车时间"},
            ),
            Slot(
                "riders",
                kind="count",
                maximum=8,
                ask={"en": "How many people?", "zh": "几个人坐车？"},
                labels={"en": "passengers", "zh": "乘车人数"},
            ),
            Slot(
                "mobile",
                kind="phone",
                ask={"en": "A number the driver can call?", "zh": "司机联系您的电话？"},
                labels={"en": "phone", "zh": "手机"},
            ),
        ],
    )


def language_lesson() -> TaskTemplate:
    return _template(
        "language_lesson",
        "schedule_lesson",
        titles={"en": "language lesson", "zh": "语言课"},
        triggers={
            "en": ["lesson", "tutor", "language class"],
            "zh": ["试听课", "外语课", "口语课", "家教", "约课"],
        },
        slots=[
            Slot(
                "language",
                choices=["english", "mandarin", "japanese", "spanish", "french"],
                synonyms={
                    "英语": "english",
                    "英文": "english",
                    "中文": "mandarin",
                    "汉语": "mandarin",
                    "普通话": "mandarin",
                    "chinese": "mandarin",
                    "日语": "japanese",
                    "西班牙语": "spanish",
                    "法语": "french",
                },
                ask={"en": "Which language?", "zh": "学哪种语言？"},
                labels={"zh": "语言"},
            ),
            Slot(
                "level",
                choices=["beginner", "intermediate", "advanced"],
                synonyms={
                    "零基础": "beginner",
                    "初级": "beginner",
                    "入门": "beginner",
                    "中级": "intermediate",
                    "高级": "advanced",
                },
                ask={
                    "en": "Beginner, intermediate or advanced?",
                    "zh": "初级、中级还是高级？",
                },
                labels={"zh": "水平"},
            ),
            Slot(
                "lesson_date",
                kind="date",
                ask={"en": "Which day?", "zh": "哪天上课？"},
                labels={"en": "date", "zh": "上课日期"},
            ),
            Slot(
                "lesson_time",
                kind="time",
                ask={"en": "What time?", "zh": "几点上课？"},
                labels={"en": "time", "zh": "上课时间"},
            ),
            Slot(
                "student",
                kind="person",
                ask={"en": "The student's name?", "zh": "学员姓名？"},
                labels={"zh": "学员"},
            ),
            Slot(
                "email",
                kind="email",
                ask={"en": "An email for the lesson link?", "zh": "上课链接发到哪个邮箱？"},
                labels={"zh": "邮箱"},
            ),
        ],
    )


def furniture_delivery() -> TaskTemplate:
    return _template(
        "furniture_delivery",
        "schedule_delivery",
        titles={"en": "furniture delivery", "zh": "家具配送"},
        triggers={
            "en": ["furniture", "delivery", "deliver", "delivered"],
            "zh": ["家具", "送货", "配送", "送到家"],
        },
        slots=[
            Slot(
                "item",
                ask={"en": "What are we delivering?", "zh": "送什么家具？"},
                labels={"en": "item", "zh": "物品"},
            ),
            Slot(
                "address",
                ask={"en": "The delivery address?", "zh": "送货地址？"},
                labels={"zh": "地址"},
            ),
            Slot(
                "delivery_date",
                kind="date",
                ask={"en": "Which day suits you?", "zh": "哪天送？"},
                labels={"en": "date", "zh": "送货日期"},
            ),
            Slot(
                "floor",
                kind="number",
                ask={"en": "Which floor is it on?", "zh": "住几楼？"},
                labels={"zh": "楼层"},
            ),
            Slot(
                "receiver",
                kind="person",
                ask={"en": "Who will receive it?", "zh": "收货人是谁？"},
                labels={"zh": "收货人"},
            ),
            Slot(
                "phone",
                kind="phone",
                ask={"en": "Their phone number?", "zh": "收货人电话？"},
                labels={"zh": "电话"},
            ),
        ],
    )


def lost_item() -> TaskTemplate:
    return _template(
        "lost_item",
        "file_report",
        titles={"en": "lost item report", "zh": "失物登记"},
        triggers={
            "en": ["lost my", "left my", "lost and found"],
            "zh": ["丢了", "落在", "失物", "忘在"],
        },
        opening_slot="item",
        slots=[
            Slot(
                "item",
                ask={"en": "What did you lose?", "zh": "丢了什么东西？"},
                labels={"en": "item", "zh": "物品"},
            ),
            Slot(
                "lost_on",
                kind="date",
                direction="past",
                ask={"en": "When did you lose it?", "zh": "哪天丢的？"},
                labels={"en": "date lost", "zh": "丢失日期"},
            ),
            Slot(
                "lost_city",
                kind="place",
                ask={"en": "In which city?", "zh": "在哪个城市丢的？"},
                labels={"en": "city", "zh": "城市"},
            ),
            Slot(
                "worth",
                kind="number",
                ask={"en": "Roughly how much is it worth?", "zh": "大概值多少钱？"},
                labels={"en": "value", "zh": "价值"},
            ),
            Slot(
                "owner",
                kind="person",
                ask={"en": "Your name?", "zh": "您怎么称呼？"},
                labels={"zh": "失主"},
            ),
            Slot(
                "email",
                kind="email",
                ask={"en": "An email to reach you if it turns up?", "zh": "找到后发邮件到哪里？"},
                labels={"zh": "邮箱"},
            ),
        ],
    )


def templates(_ledger: object = None) -> list[TaskTemplate]:
    """Every template of the ``users3`` set."""
    return [
        train_ticket(),
        airport_transfer(),
        language_lesson(),
        furniture_delivery(),
        lost_item(),
    ]
