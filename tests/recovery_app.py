"""Task templates for the recovery race test, loadable by ``relaystate --app``.

``pay`` writes to the ledger named by RELAYSTATE_LEDGER, then (when RECOVERY_CRASH is set)
dies before its success is recorded, leaving a running action under a dead lease.
"""

from __future__ import annotations

import os
from typing import Any

from relaystate import ActionContext, Outcome, Stage, TaskTemplate
from relaystate.demo.ledger import Ledger


class Crash(BaseException):
    """The process dying inside the action (escapes every ``except Exception``)."""


def templates() -> list[TaskTemplate]:
    ledger = Ledger(os.environ["RELAYSTATE_LEDGER"])
    template = TaskTemplate("payment", stages=[Stage("paying", actions=["pay"]), Stage("done")])

    @template.action(side_effect=True, idempotent=False)
    def pay(ctx: ActionContext) -> Any:
        effect = ledger.apply(ctx.idempotency_key, "payment", {}, deduplicate=False)
        if os.environ.get("RECOVERY_CRASH"):
            raise Crash()
        return effect

    @pay.check
    def paid(ctx: ActionContext) -> Outcome:
        found = ledger.status(ctx.idempotency_key)
        return Outcome.succeeded(found) if found else Outcome.not_found()

    return [template]
