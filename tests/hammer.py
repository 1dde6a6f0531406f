"""One hammering process for the concurrency tests: turns and counter increments on tasks.

Usage: python -m tests.hammer STORE_URL USER SHARED_TASK OWN_TASK ROUNDS
Prints one JSON line: how many changes landed and how many conflicts were surfaced.
"""

from __future__ import annotations

import json
import os
import sys

from relaystate import (
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskState,
    TaskTemplate,
    VersionConflict,
    all_required_slots,
    open_store,
)

CHAT = TaskTemplate(
    "chat",
    slots=[Slot("note", required=False), Slot("never")],
    stages=[Stage("collecting", exit=all_required_slots), Stage("done")],
)


def main() -> None:
    url, user, shared, own, rounds = sys.argv[1:6]
    me = str(os.getpid())
    landed = {"shared": 0, "own": 0, "turns": 0, "conflicts": 0}
    with Runtime(open_store(url), [CHAT]) as rt:
        for i in range(int(rounds)):
            for which, task_id in (("shared", shared), ("own", own)):

                def bump(draft: TaskState) -> bool:
                    counts = draft.task.context.setdefault("count", {})
                    counts[me] = counts.get(me, 0) + 1
                    return True

                try:
                    rt._writer.mutate(
                        task_id, Scope.user(user), bump, actor=f"hammer:{me}", reason="bump"
                    )
                    landed[which] += 1
                except VersionConflict:
                    landed["conflicts"] += 1
            try:
                rt.fill(
                    Scope.user(user),
                    shared,
                    {"note": f"{me}-{i}"},
                    session_id=f"s-{me}",
                    messages=[("user", f"turn {i} from {me}")],
                )
                landed["turns"] += 1
            except VersionConflict:
                landed["conflicts"] += 1
    print(json.dumps({"pid": me, **landed}))


if __name__ == "__main__":
    main()
