"""One turn of a session race, in its own process: wait for the shared start time, say the
text, print the Turn as JSON (run by tests/test_session_races.py)."""

from __future__ import annotations

import json
import sys
import time

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates


def main() -> None:
    url, ledger, user, session_id, start, text = sys.argv[1:7]
    with Runtime(open_store(url), templates(ledger)) as rt:
        conversation = Conversation(rt)
        delay = float(start) - time.time()
        if delay > 0:
            time.sleep(delay)
        turn = conversation.handle(Scope.user(user), text, session_id)
    print(json.dumps(turn.to_dict(), ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
