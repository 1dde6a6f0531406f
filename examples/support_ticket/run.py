"""A support ticket with a human approval step, end to end, in one process:

    python examples/support_ticket/run.py

Ada reports an urgent outage in a chat; the ticket waits for a supervisor, who approves it
(an operator's slot: Ada cannot approve her own ticket); only then is it opened in the
ticket system, once. Bob's normal ticket goes straight through. The files go to ./demo-data
(SUPPORT_TICKETS_DIR to move them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from relaystate import Runtime, Scope, ScopeError, TaskStatus, open_store
from relaystate.conversation import Conversation
from relaystate.demo import Ledger

sys.path.insert(0, str(Path(__file__).parent))
from agent import support_ticket


def main() -> None:
    folder = Path(os.environ.get("SUPPORT_TICKETS_DIR", "demo-data"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("support-*.db*"):
        old.unlink()
    tickets = Ledger(folder / "support-tickets.db")
    runtime = Runtime(open_store(f"sqlite:///{folder}/support-store.db"), [support_ticket(tickets)])
    chat = Conversation(runtime)
    ada, bob, sam = Scope.user("ada"), Scope.user("bob"), Scope.admin("sam")

    print("-- Ada, in the chat")
    for said in ("The VPN is down and nobody can work, it's urgent", "ada@example.com", "yes"):
        turn = chat.handle(ada, said, "ada-laptop")
        print(f"ada> {said}\nrelaystate> {turn.reply}")
    assert turn.state is not None
    ticket = turn.state.task.id
    print(f"ticket {ticket[:8]}: {turn.state.task.status}: {turn.state.task.status_text}")

    turn = chat.handle(ada, "approved", "ada-laptop")
    print(f"ada> approved\nrelaystate> {turn.reply}")
    try:
        runtime.fill(ada, ticket, {"approval": "approved"})
    except ScopeError as exc:
        print(f"ada cannot approve it herself: {exc}")

    print("\n-- Sam, the supervisor, sees what waits for a person")
    waiting = runtime.tasks(sam, statuses=[TaskStatus.NEEDS_ATTENTION])
    for task in waiting:
        print(f"  {task.id[:8]} {task.user_id}: {task.slots['subject']} ({task.slots['severity']})")
    assert [t.id for t in waiting] == [ticket]
    state = runtime.fill(sam, ticket, {"approval": "approved"})
    print(f"sam approves: {state.task.status}: {state.task.status_text}")
    opened = state.actions[0].output
    print(f"the ticket system opened {opened['id']} for {opened['email']}")

    print("\n-- Bob's normal ticket needs no approval")
    for said in ("The printer on floor 2 is not working", "normal", "bob@example.com", "yes"):
        turn = chat.handle(bob, said, "bob-phone")
        print(f"bob> {said}\nrelaystate> {turn.reply}")
    assert turn.state is not None and turn.state.task.status == TaskStatus.DONE

    keys = [entry["effects"] for entry in tickets.entries()]
    print(f"\nticket system: {len(keys)} tickets, effects per key {keys}")
    assert keys == [1, 1], keys  # one ticket each, never two
    runtime.close()


if __name__ == "__main__":
    main()
