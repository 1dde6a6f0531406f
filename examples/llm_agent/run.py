"""A table booking understood with a language model when one is configured:

    python examples/llm_agent/run.py                        # rules only
    RELAYSTATE_MODEL_BASE_URL=... RELAYSTATE_MODEL_NAME=... python examples/llm_agent/run.py

Dana says "me, Mulder and Skinner": the rules count numbers and phrases ("me and my two
colleagues"), not a list of names, so without a model the agent asks again; with one, the
model's answer (3) is checked by the slot's own rules and taken. Replies are reworded by the
model, and kept as they are if a rewording drops or adds a number. Files go to ./demo-data
(TABLE_DIR to move them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Turn
from relaystate.demo import Ledger
from relaystate.llm import RuleModel

sys.path.insert(0, str(Path(__file__).parent))
from agent import conversation, table_booking


def main() -> None:
    folder = Path(os.environ.get("TABLE_DIR", "demo-data"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("table-*.db*"):
        old.unlink()
    bookings = Ledger(folder / "table-bookings.db")
    with Runtime(open_store(f"sqlite:///{folder}/table-store.db"), [table_booking(bookings)]) as rt:
        chat = conversation(rt)
        uses = "rules only" if isinstance(chat.model, RuleModel) else f"the model {chat.model!r}"
        print(f"understanding and replies: {uses}")
        dana = Scope.user("dana")

        def say(text: str) -> Turn:
            turn = chat.handle(dana, text, "dana-phone")
            print(f"dana> {text}\nrelaystate> {turn.reply}")
            return turn

        say("I'd like to book a table for tomorrow")
        turn = say("me, Mulder and Skinner")
        if turn.state is not None and "people" in turn.state.task.missing_slots:
            print("(the rules cannot count that; she says it again)")
            say("3")
        say("Dana Scully")
        turn = say("yes")
        assert turn.state is not None
        print(f"the booking: {turn.state.task.status}, slots {turn.state.task.slots}")
        assert turn.state.task.status == "done" and turn.state.task.slots["people"] == 3


if __name__ == "__main__":
    main()
