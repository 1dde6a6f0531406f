"""PgBouncer in transaction mode restarted under load (issue 22): the runtime answers clear
errors while it is away, serves again by itself, and loses no turn it acknowledged."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.errors import StoreUnavailable

from .. import services

TALKERS = 4


def test_a_pooler_restart_gives_clear_errors_and_loses_nothing(
    pgbouncer_server: services.PgBouncer, postgres_url: str, tmp_path: Path
) -> None:
    url = pgbouncer_server.url(postgres_url.rsplit("/", 1)[1])
    rt = Runtime(open_store(url), templates(tmp_path / "ledger.db"))
    conv = Conversation(rt)
    committed: list[tuple[str, str]] = []
    clear: list[str] = []
    other: list[str] = []
    stop = threading.Event()

    def talk(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                turn = conv.handle(Scope.user(f"u{i}"), f"a refund please, ORD-{i}{n:04d}", f"s{i}")
            except StoreUnavailable as exc:
                clear.append(str(exc))
                time.sleep(0.05)
            except Exception as exc:  # a raw driver error: what this test forbids
                other.append(f"{type(exc).__name__}: {exc}")
            else:
                assert turn.state is not None
                committed.append((f"u{i}", turn.state.task.id))

    talkers = [threading.Thread(target=talk, args=(i,)) for i in range(TALKERS)]
    for t in talkers:
        t.start()
    try:
        time.sleep(1.0)
        pgbouncer_server.stop()  # SIGTERM: PgBouncer closes every connection at once
        time.sleep(1.5)
        pgbouncer_server.start()
        up = time.monotonic()
        during = len(committed)
        while len(committed) <= during and time.monotonic() - up < 20:
            time.sleep(0.05)
        back = time.monotonic() - up
        time.sleep(0.5)
    finally:
        stop.set()
        for t in talkers:
            t.join(30)
    assert other == [], other[:3]
    assert clear, "no call failed while the pooler was away"
    assert len(committed) > during, "service did not come back after the restart"
    assert back < 5, back
    for user, task_id in committed:
        assert rt.task(Scope.user(user), task_id) is not None
    rt.close()
