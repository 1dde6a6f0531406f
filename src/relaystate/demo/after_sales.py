"""The phone that will not charge, from the articles: diagnose, check warranty, then act.

Diagnosis and the warranty look-up are read-only; the last step opens a repair order (in
warranty) or a paid return (out of warranty) at the downstream ledger, once, by key.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from ..task.retry import Retry
from ..task.spec import ActionContext, Outcome
from ..task.templates import Slot, Stage, TaskTemplate, all_required_slots, user_confirmed
from .ledger import Ledger

WARRANTY_DAYS = 365
MODELS = ["Pixel 8", "Pixel 9", "iPhone 15", "iPhone 16", "Mate 60", "Xiaomi 14"]


def after_sales(ledger: Ledger, *, today: date | None = None) -> TaskTemplate:
    template = TaskTemplate(
        "after_sales",
        version=1,
        goal="Fix a device that does not work",
        titles={"en": "after-sales service", "zh": "售后服务"},
        opening_slot="symptoms",
        triggers={
            "en": [
                "won't charge",
                "not charging",
                "doesn't charge",
                "charges slowly",
                "broken",
                "broke",
                "cracked",
                "keeps dying",
                "dies",
                "battery",
                "screen",
                "went black",
                "black screen",
                "won't turn on",
                "overheats",
                "repair",
                "fix my",
                "after-sales",
                "warranty",
                "stuck",
                "frozen",
                "freezes",
                "keeps restarting",
                "restarts",
                "reboots",
                "overheating",
                "gets hot",
                "got hot",
                "super hot",
                "shut off",
                "shuts off",
                "shuts down",
                "turns off",
                "loose",
                "charging port",
                "not working",
                "doesn't work",
                "stopped working",
                "won't work",
                "no sound",
                "speaker",
                "microphone",
                "camera",
                "touchscreen",
                "water damage",
                "drains",
                "dead",
            ],
            "zh": [
                "充不进电",
                "充不上电",
                "不能充电",
                "充电慢",
                "充电特别慢",
                "坏了",
                "碎了",
                "屏幕",
                "黑屏",
                "死机",
                "开不了机",
                "自动关机",
                "发烫",
                "电池",
                "耗电",
                "维修",
                "修一下",
                "保修",
                "售后",
                "重启",
                "卡顿",
                "卡死",
                "卡住",
                "没反应",
                "松了",
                "充电口",
                "发热",
                "很烫",
                "关机",
                "闪退",
                "没声音",
                "失灵",
                "进水",
                "用不了",
                "打不开",
                "不亮",
                "摄像头",
                "掉电",
                "不好用",
            ],
        },
        keywords={
            "en": ["phone", "repair", "after-sales", "service"],
            "zh": ["手机", "维修", "售后", "修手机"],
        },
        slots=[
            Slot(
                "symptoms",
                labels={"zh": "症状"},
                ask={"en": "What happens exactly?", "zh": "具体是什么症状？"},
                why={
                    "en": "The symptoms tell what to check first and what to repair.",
                    "zh": "需要了解症状，才能判断先检查什么、修什么。",
                },
            ),
            Slot(
                "model",
                labels={"zh": "型号"},
                why={
                    "en": "The model decides which parts and steps apply.",
                    "zh": "不同型号的维修方式和配件不同。",
                },
                choices=MODELS,
                synonyms={
                    "pixel8": "Pixel 8",
                    "pixel9": "Pixel 9",
                    "iphone15": "iPhone 15",
                    "iphone16": "iPhone 16",
                    "mate60": "Mate 60",
                    "xiaomi14": "Xiaomi 14",
                    "苹果15": "iPhone 15",
                    "苹果16": "iPhone 16",
                    "小米14": "Xiaomi 14",
                    "华为mate60": "Mate 60",
                    "华为mate 60": "Mate 60",
                    "谷歌pixel 8": "Pixel 8",
                    "谷歌pixel 9": "Pixel 9",
                },
                ask={"en": "Which phone model is it?", "zh": "手机是什么型号？"},
            ),
            Slot(
                "purchase_date",
                kind="date",
                direction="past",
                labels={"zh": "购买日期", "en": "purchase date"},
                ask={"en": "When did you buy it?", "zh": "什么时候买的？"},
                why={
                    "en": "The purchase date tells whether the phone is still under warranty.",
                    "zh": "需要购买日期来确认手机是否还在保修期内。",
                },
            ),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots, labels={"zh": "收集信息"}),
            Stage("diagnosing", actions=["diagnose", "check_warranty"], labels={"zh": "诊断中"}),
            Stage("confirming", exit=user_confirmed, labels={"zh": "待确认"}),
            Stage("executing", actions=["open_service_order"], labels={"zh": "办理中"}),
            Stage("done", labels={"zh": "已完成"}),
        ],
    )

    @template.action
    def diagnose(ctx: ActionContext) -> dict[str, Any]:
        """Read-only: the scripted steps a support agent would walk through."""
        text = str(ctx.input["symptoms"]).lower()
        cable = any(w in text for w in ("cable", "charger", "线", "充电器"))
        return {
            "steps": ["try another cable and charger", "clean the port", "restart the phone"],
            "likely": "charger or cable" if cable else "charging port",
        }

    @template.action
    def check_warranty(ctx: ActionContext) -> dict[str, Any]:
        bought = date.fromisoformat(str(ctx.input["purchase_date"]))
        age = ((today or date.today()) - bought).days
        return {"in_warranty": 0 <= age <= WARRANTY_DAYS, "days_since_purchase": age}

    def order_input(task: Any, outputs: Any) -> dict[str, Any]:
        kind = "repair" if outputs["check_warranty"]["in_warranty"] else "paid_return"
        return {**task.slots, "kind": kind, "likely": outputs["diagnose"]["likely"]}

    @template.action(
        side_effect=True, idempotent=True, retry=Retry(max_attempts=3), input=order_input
    )
    def open_service_order(ctx: ActionContext) -> dict[str, Any]:
        return ledger.apply(ctx.idempotency_key, str(ctx.input["kind"]), dict(ctx.input))

    @open_service_order.check
    def service_order_status(ctx: ActionContext) -> Outcome:
        effect = ledger.status(ctx.idempotency_key)
        return Outcome.not_found() if effect is None else Outcome.succeeded(effect)

    return template
