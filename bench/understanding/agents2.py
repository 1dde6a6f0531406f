"""Five more templates declared as a new user would, for the ``users2`` set: scored only,
never tuned on (the engine's understanding of templates it has never met)."""

from __future__ import annotations

import zlib
from typing import Any

from relaystate import (
    ActionContext,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    user_confirmed,
)


def _template(type_: str, action: str, **kwargs: Any) -> TaskTemplate:
    template = TaskTemplate(
        type_,
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("booking", actions=[action]),
            Stage("done"),
        ],
        **kwargs,
    )

    @template.action(name=action, side_effect=True, idempotent=True)
    def book(ctx: ActionContext) -> dict[str, Any]:
        return {"reference": f"BK-{zlib.crc32(ctx.idempotency_key.encode()) % 100000:05d}"}

    return template


def gym_class() -> TaskTemplate:
    return _template(
        "gym_class",
        "reserve_spot",
        titles={"en": "gym class", "zh": "健身课预约"},
        triggers={"en": ["gym", "class", "a spot in"], "zh": ["健身", "上课", "约课"]},
        slots=[
            Slot(
                "class_type",
                choices=["yoga", "spin", "pilates", "boxing"],
                synonyms={
                    "瑜伽": "yoga",
                    "动感单车": "spin",
                    "cycling": "spin",
                    "普拉提": "pilates",
                    "拳击": "boxing",
                },
                ask={"en": "Which class?", "zh": "哪节课？"},
                labels={"en": "class", "zh": "课程"},
            ),
            Slot(
                "date", kind="date", ask={"en": "Which day?", "zh": "哪天？"}, labels={"zh": "日期"}
            ),
            Slot(
                "start_time",
                ask={"en": "What time?", "zh": "几点的？"},
                labels={"en": "time", "zh": "时间"},
            ),
            Slot(
                "member_name", ask={"en": "Your name?", "zh": "会员姓名？"}, labels={"zh": "会员"}
            ),
        ],
    )


def apartment_viewing() -> TaskTemplate:
    return _template(
        "apartment_viewing",
        "schedule_viewing",
        titles={"en": "apartment viewing", "zh": "看房预约"},
        triggers={"en": ["apartment", "viewing", "flat to rent"], "zh": ["看房", "租房"]},
        slots=[
            Slot("city", ask={"en": "In which city?", "zh": "哪个城市？"}, labels={"zh": "城市"}),
            Slot(
                "bedrooms",
                kind="number",
                ask={"en": "How many bedrooms?", "zh": "几居室？"},
                labels={"zh": "卧室数"},
            ),
            Slot(
                "budget",
                kind="number",
                ask={"en": "Your monthly budget?", "zh": "每月预算多少？"},
                labels={"zh": "预算"},
            ),
            Slot(
                "viewing_date",
                kind="date",
                ask={"en": "When can you come?", "zh": "哪天看房？"},
                labels={"en": "viewing date", "zh": "看房日期"},
            ),
            Slot(
                "contact", ask={"en": "Your name?", "zh": "怎么称呼您？"}, labels={"zh": "联系人"}
            ),
            Slot("mobile", ask={"en": "A mobile number?", "zh": "手机号？"}, labels={"zh": "手机"}),
        ],
    )


def home_cleaning() -> TaskTemplate:
    return _template(
        "home_cleaning",
        "send_cleaner",
        titles={"en": "home cleaning", "zh": "家政保洁"},
        triggers={
            "en": ["cleaning", "a cleaner", "clean my"],
            "zh": ["保洁", "打扫", "家政", "清洁"],
        },
        slots=[
            Slot(
                "address",
                ask={"en": "What's the address?", "zh": "地址是？"},
                labels={"zh": "地址"},
            ),
            Slot(
                "date", kind="date", ask={"en": "Which day?", "zh": "哪天？"}, labels={"zh": "日期"}
            ),
            Slot(
                "arrival_time",
                ask={"en": "What time should they arrive?", "zh": "几点上门？"},
                labels={"en": "arrival time", "zh": "上门时间"},
            ),
            Slot(
                "hours",
                kind="number",
                ask={"en": "How many hours?", "zh": "需要几个小时？"},
                labels={"zh": "时长"},
            ),
            Slot(
                "phone_number",
                ask={"en": "Your phone number?", "zh": "您的电话？"},
                labels={"zh": "电话"},
            ),
        ],
    )


def event_tickets() -> TaskTemplate:
    return _template(
        "event_tickets",
        "issue_tickets",
        titles={"en": "concert tickets", "zh": "演出购票"},
        triggers={"en": ["tickets", "concert", "show"], "zh": ["门票", "演唱会", "买票", "票"]},
        slots=[
            Slot(
                "quantity",
                kind="number",
                ask={"en": "How many tickets?", "zh": "要几张？"},
                labels={"en": "tickets", "zh": "张数"},
            ),
            Slot(
                "show_date",
                kind="date",
                ask={"en": "Which night?", "zh": "哪一场（日期）？"},
                labels={"en": "date", "zh": "场次"},
            ),
            Slot(
                "section",
                choices=["floor", "lower", "upper", "vip"],
                synonyms={
                    "内场": "floor",
                    "看台": "lower",
                    "楼下": "lower",
                    "楼上": "upper",
                    "balcony": "upper",
                    "VIP区": "vip",
                },
                ask={"en": "Floor, lower, upper or VIP?", "zh": "内场、看台、楼上还是VIP？"},
                labels={"zh": "区域"},
            ),
            Slot(
                "buyer",
                ask={"en": "The buyer's name?", "zh": "购票人姓名？"},
                labels={"zh": "购票人"},
            ),
            Slot(
                "email_address",
                ask={"en": "Where do we send them?", "zh": "电子票发到哪个邮箱？"},
                labels={"en": "email", "zh": "邮箱"},
            ),
        ],
    )


def pet_grooming() -> TaskTemplate:
    return _template(
        "pet_grooming",
        "book_groomer",
        titles={"en": "pet grooming", "zh": "宠物美容"},
        triggers={
            "en": ["grooming", "groomer", "my dog", "my cat"],
            "zh": ["宠物美容", "洗澡", "美容", "狗狗", "猫咪"],
        },
        slots=[
            Slot(
                "service",
                choices=["bath", "haircut", "nails", "full groom"],
                synonyms={
                    "洗澡": "bath",
                    "剪毛": "haircut",
                    "修剪": "haircut",
                    "剪指甲": "nails",
                    "全套": "full groom",
                    "trim": "haircut",
                },
                ask={
                    "en": "Bath, haircut, nails or a full groom?",
                    "zh": "洗澡、剪毛、剪指甲还是全套？",
                },
                labels={"zh": "服务"},
            ),
            Slot(
                "day", kind="date", ask={"en": "Which day?", "zh": "哪天？"}, labels={"zh": "日期"}
            ),
            Slot("time", ask={"en": "What time?", "zh": "几点？"}, labels={"zh": "时间"}),
            Slot("owner", ask={"en": "Your name?", "zh": "主人姓名？"}, labels={"zh": "主人"}),
            Slot(
                "tel",
                ask={"en": "A number to call?", "zh": "联系电话？"},
                labels={"en": "phone", "zh": "电话"},
            ),
        ],
    )


def templates(_ledger: object = None) -> list[TaskTemplate]:
    """Every template of the ``users2`` set."""
    return [gym_class(), apartment_viewing(), home_cleaning(), event_tickets(), pet_grooming()]
