"""Six task templates declared as a new user would, from the public API alone, for the
understanding benchmark's ``users`` set: domains, slot kinds and phrasings the demo agents do
not have (stays, tables, appointments, rentals, parcels, claims).

They are declared plainly on purpose: a slot's kind and name, its question and label, a few
triggers; no cue lists tuned to the conversations. What the engine understands of them is
what any user's template gets for free.
"""

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


def _flow(action: str) -> list[Stage]:
    return [
        Stage("collecting", exit=all_required_slots),
        Stage("confirming", exit=user_confirmed),
        Stage("submitting", actions=[action]),
        Stage("done"),
    ]


def _submit(template: TaskTemplate, name: str) -> None:
    @template.action(name=name, side_effect=True, idempotent=True)
    def submit(ctx: ActionContext) -> dict[str, Any]:
        return {"reference": f"REF-{zlib.crc32(ctx.idempotency_key.encode()) % 100000:05d}"}


def hotel_booking() -> TaskTemplate:
    t = TaskTemplate(
        "hotel_booking",
        titles={"en": "hotel booking", "zh": "酒店预订"},
        triggers={
            "en": ["hotel", "a room", "book a stay"],
            "zh": ["酒店", "订房", "住宿", "宾馆"],
        },
        slots=[
            Slot("city", ask={"en": "Which city?", "zh": "哪个城市？"}, labels={"zh": "城市"}),
            Slot(
                "check_in",
                kind="date",
                ask={"en": "Which day do you arrive?", "zh": "哪天入住？"},
                labels={"en": "check-in date", "zh": "入住日期"},
            ),
            Slot(
                "nights",
                kind="number",
                ask={"en": "How many nights?", "zh": "住几晚？"},
                labels={"zh": "晚数"},
            ),
            Slot(
                "guests",
                kind="number",
                ask={"en": "How many guests?", "zh": "几位入住？"},
                labels={"zh": "人数"},
            ),
            Slot(
                "room_type",
                choices=["single", "double", "twin", "suite"],
                synonyms={
                    "单人间": "single",
                    "大床房": "double",
                    "双床房": "twin",
                    "套房": "suite",
                },
                ask={
                    "en": "Single, double, twin or suite?",
                    "zh": "单人间、大床房、双床房还是套房？",
                },
                labels={"en": "room type", "zh": "房型"},
            ),
            Slot(
                "guest_name",
                ask={"en": "Whose name is the booking under?", "zh": "入住人姓名？"},
                labels={"en": "guest name", "zh": "入住人"},
            ),
            Slot(
                "phone",
                ask={"en": "A phone number for the hotel?", "zh": "联系电话？"},
                labels={"en": "phone", "zh": "电话"},
            ),
        ],
        stages=_flow("reserve_room"),
    )
    _submit(t, "reserve_room")
    return t


def table_reservation() -> TaskTemplate:
    t = TaskTemplate(
        "table_reservation",
        titles={"en": "table reservation", "zh": "餐厅订位"},
        triggers={
            "en": ["a table", "reserve a table", "dinner reservation", "book a table"],
            "zh": ["订位", "订桌", "订个桌", "餐厅", "订座"],
        },
        slots=[
            Slot(
                "party_size",
                kind="number",
                ask={"en": "For how many people?", "zh": "几位用餐？"},
                labels={"en": "party size", "zh": "人数"},
            ),
            Slot(
                "date", kind="date", ask={"en": "Which day?", "zh": "哪天？"}, labels={"zh": "日期"}
            ),
            Slot("time", ask={"en": "What time?", "zh": "几点？"}, labels={"zh": "时间"}),
            Slot(
                "seating",
                choices=["indoor", "outdoor", "private room"],
                synonyms={
                    "室内": "indoor",
                    "大厅": "indoor",
                    "室外": "outdoor",
                    "露台": "outdoor",
                    "包间": "private room",
                    "包厢": "private room",
                    "terrace": "outdoor",
                },
                ask={"en": "Indoor, outdoor or a private room?", "zh": "大厅、室外还是包间？"},
                labels={"zh": "座位"},
            ),
            Slot(
                "name",
                ask={"en": "Under what name?", "zh": "请问怎么称呼？"},
                labels={"zh": "姓名"},
            ),
            Slot("phone", ask={"en": "A phone number?", "zh": "联系电话？"}, labels={"zh": "电话"}),
        ],
        stages=_flow("hold_table"),
    )
    _submit(t, "hold_table")
    return t


def doctor_appointment() -> TaskTemplate:
    t = TaskTemplate(
        "doctor_appointment",
        titles={"en": "doctor's appointment", "zh": "门诊预约"},
        triggers={
            "en": ["appointment", "see a doctor", "a doctor", "clinic"],
            "zh": ["挂号", "看病", "预约医生", "门诊", "看医生"],
        },
        slots=[
            Slot(
                "department",
                choices=["general", "dental", "pediatrics", "dermatology", "eye"],
                synonyms={
                    "全科": "general",
                    "内科": "general",
                    "牙科": "dental",
                    "dentist": "dental",
                    "口腔科": "dental",
                    "儿科": "pediatrics",
                    "kids": "pediatrics",
                    "皮肤科": "dermatology",
                    "skin": "dermatology",
                    "眼科": "eye",
                    "ophthalmology": "eye",
                    "GP": "general",
                },
                ask={"en": "Which department?", "zh": "挂哪个科？"},
                labels={"zh": "科室"},
            ),
            Slot(
                "patient",
                ask={"en": "The patient's name?", "zh": "就诊人姓名？"},
                labels={"en": "patient", "zh": "就诊人"},
            ),
            Slot(
                "day", kind="date", ask={"en": "Which day?", "zh": "哪天？"}, labels={"zh": "日期"}
            ),
            Slot(
                "time",
                ask={"en": "What time suits you?", "zh": "几点方便？"},
                labels={"zh": "时间"},
            ),
            Slot(
                "symptoms",
                ask={"en": "What are the symptoms?", "zh": "哪里不舒服？"},
                labels={"zh": "症状"},
            ),
        ],
        stages=_flow("book_slot"),
    )
    _submit(t, "book_slot")
    return t


def car_rental() -> TaskTemplate:
    t = TaskTemplate(
        "car_rental",
        titles={"en": "car rental", "zh": "租车"},
        triggers={
            "en": ["rent a car", "car rental", "hire a car"],
            "zh": ["租车", "租一辆车", "租辆车"],
        },
        slots=[
            Slot(
                "pickup_city",
                ask={"en": "Where do you pick it up?", "zh": "在哪个城市取车？"},
                labels={"en": "pick-up city", "zh": "取车城市"},
            ),
            Slot(
                "pickup_date",
                kind="date",
                ask={"en": "When do you pick it up?", "zh": "哪天取车？"},
                labels={"en": "pick-up date", "zh": "取车日期"},
            ),
            Slot(
                "return_date",
                kind="date",
                ask={"en": "When do you bring it back?", "zh": "哪天还车？"},
                labels={"en": "return date", "zh": "还车日期"},
            ),
            Slot(
                "car_type",
                choices=["compact", "sedan", "suv", "van"],
                synonyms={
                    "小型车": "compact",
                    "经济型": "compact",
                    "轿车": "sedan",
                    "SUV": "suv",
                    "越野": "suv",
                    "面包车": "van",
                    "商务车": "van",
                    "minivan": "van",
                },
                ask={"en": "Compact, sedan, SUV or van?", "zh": "小型车、轿车、SUV还是商务车？"},
                labels={"en": "car type", "zh": "车型"},
            ),
            Slot(
                "driver",
                ask={"en": "The driver's name?", "zh": "驾驶人姓名？"},
                labels={"zh": "驾驶人"},
            ),
            Slot(
                "email",
                ask={"en": "An email for the voucher?", "zh": "接收确认单的邮箱？"},
                labels={"zh": "邮箱"},
            ),
        ],
        stages=_flow("reserve_car"),
    )
    _submit(t, "reserve_car")
    return t


def parcel_pickup() -> TaskTemplate:
    t = TaskTemplate(
        "parcel_pickup",
        titles={"en": "parcel pick-up", "zh": "快递上门取件"},
        triggers={
            "en": ["pick up a parcel", "parcel", "courier", "send a package", "package"],
            "zh": ["寄快递", "寄件", "取件", "快递"],
        },
        slots=[
            Slot(
                "address",
                ask={"en": "Where should the courier come?", "zh": "上门取件的地址？"},
                labels={"en": "pick-up address", "zh": "取件地址"},
            ),
            Slot(
                "day",
                kind="date",
                ask={"en": "Which day?", "zh": "哪天上门？"},
                labels={"zh": "日期"},
            ),
            Slot(
                "weight",
                kind="number",
                ask={"en": "Roughly how heavy is it, in kg?", "zh": "大概多重（公斤）？"},
                labels={"en": "weight (kg)", "zh": "重量"},
            ),
            Slot(
                "destination_city",
                ask={"en": "Which city does it go to?", "zh": "寄到哪个城市？"},
                labels={"en": "destination", "zh": "目的城市"},
            ),
            Slot(
                "contact_phone",
                ask={"en": "A phone number for the courier?", "zh": "联系电话？"},
                labels={"en": "phone", "zh": "电话"},
            ),
        ],
        stages=_flow("order_pickup"),
    )
    _submit(t, "order_pickup")
    return t


def insurance_claim() -> TaskTemplate:
    t = TaskTemplate(
        "insurance_claim",
        titles={"en": "insurance claim", "zh": "保险理赔"},
        triggers={"en": ["claim", "insurance"], "zh": ["理赔", "报案", "保险"]},
        opening_slot="what_happened",
        slots=[
            Slot(
                "policy_number",
                pattern=r"POL-\d{6}",
                ask={"en": "Your policy number (POL-123456)?", "zh": "保单号（POL-123456）？"},
                labels={"en": "policy number", "zh": "保单号"},
            ),
            Slot(
                "incident_date",
                kind="date",
                direction="past",
                ask={"en": "When did it happen?", "zh": "什么时候发生的？"},
                labels={"en": "date of the incident", "zh": "出险日期"},
            ),
            Slot(
                "what_happened",
                ask={"en": "What happened?", "zh": "发生了什么？"},
                labels={"en": "what happened", "zh": "经过"},
            ),
            Slot(
                "amount",
                kind="number",
                ask={"en": "How much are you claiming?", "zh": "索赔金额是多少？"},
                labels={"zh": "金额"},
            ),
            Slot("email", ask={"en": "Your email?", "zh": "您的邮箱？"}, labels={"zh": "邮箱"}),
        ],
        stages=_flow("file_claim"),
    )
    _submit(t, "file_claim")
    return t


def templates(_ledger: object = None) -> list[TaskTemplate]:
    """Every template of the ``users`` set (the benchmark passes its ledger path; unused)."""
    return [
        hotel_booking(),
        table_reservation(),
        doctor_appointment(),
        car_rental(),
        parcel_pickup(),
        insurance_claim(),
    ]
