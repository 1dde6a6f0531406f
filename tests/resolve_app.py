"""Task templates whose Actions fail for good, loadable by ``relaystate --app``, for the
tests of what ``resolve`` may settle.

``shipment``: ``ship`` fails for good and there is nothing to unwind, so the Task fails.
``exchange``: ``reserve`` succeeds, ``ship`` fails for good, and the compensation of
``reserve`` fails too: the saga stops there and the Task needs attention on that one.
"""

from __future__ import annotations

from typing import Any

from relaystate import ActionContext, PermanentError, Stage, TaskTemplate


def templates() -> list[TaskTemplate]:
    shipment = TaskTemplate("shipment", stages=[Stage("shipping", actions=["ship"]), Stage("done")])

    @shipment.action(side_effect=True, idempotent=True)
    def ship(ctx: ActionContext) -> Any:
        raise PermanentError("no courier takes this parcel")

    exchange = TaskTemplate(
        "exchange", stages=[Stage("swapping", actions=["reserve", "send"]), Stage("done")]
    )

    @exchange.action(side_effect=True, idempotent=True)
    def reserve(ctx: ActionContext) -> Any:
        return {"reserved": ctx.idempotency_key}

    @reserve.compensate
    def release(ctx: ActionContext) -> Any:
        raise PermanentError("the warehouse refused to release the reservation")

    @exchange.action(side_effect=True, idempotent=True)
    def send(ctx: ActionContext) -> Any:
        raise PermanentError("no courier takes this parcel")

    return [shipment, exchange]
