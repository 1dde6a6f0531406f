"""PostgreSQL stopped (as by a crash) and started again under load: clear errors while it is
down, full service after, nothing that was committed lost (issue 9)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.errors import StoreUnavailable

from . import services

TALKERS = 4


def test_an_outage_gives_clear_errors_and_loses_nothing(
    pg_cluster: services.PostgresCluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    committed: list[tuple[str, str, str]] = []  # (user, session, task) of turns that returned
    clear: list[str] = []
    other: list[str] = []
    stop = threading.Event()
    rt = Runtime(open_store(pg_cluster.url), templates(ledger))
    conv = Conversation(rt)

    def talk(i: int) -> None:
        n = 0
        while not stop.is_set():
            user, session = f"u{i}", f"s{i}"
            try:
                turn = conv.handle(
                    Scope.user(user), f"another refund please, ORD-{i}{n:04d}", session
                )
            except StoreUnavailable as exc:
                clear.append(str(exc))
            except Exception as exc:  # a raw driver error: what this test forbids
                other.append(f"{type(exc).__name__}: {exc}")
            else:
                assert turn.state is not None
                committed.append((user, session, turn.state.task.id))
            n += 1

    talkers = [threading.Thread(target=talk, args=(i,)) for i in range(TALKERS)]
    for t in talkers:
        t.start()
    try:
        time.sleep(1.0)
        before = len(committed)
        pg_cluster.stop(mode="immediate")  # as a crash: no shutdown checkpoint
        down = time.monotonic()
        cli = subprocess.run(
            [
                *(sys.executable, "-m", "relaystate.cli", "say", "--user", "x", "--store"),
                *(pg_cluster.url, "--ledger", str(ledger), "hello"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 2 and cli.stderr.startswith("error: "), cli.stderr
        assert "Traceback" not in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
        while not clear and time.monotonic() - down < 30:
            time.sleep(0.1)
        assert clear, "no call failed while the server was down"
        pg_cluster.start()
        up = time.monotonic()
        during = len(committed)
        while len(committed) <= during and time.monotonic() - up < 30:
            time.sleep(0.1)
        assert len(committed) > during, "service did not come back after the restart"
        time.sleep(0.5)
    finally:
        stop.set()
        for t in talkers:
            t.join(timeout=60)
    rt.close()
    assert other == [], other[:3]
    assert before > 0
    with Runtime(open_store(pg_cluster.url), templates(ledger)) as after:
        last: dict[tuple[str, str], str] = {}
        for user, session, task_id in committed:  # every turn that returned is there
            assert after.task(Scope.user(user), task_id).task.id == task_id
            last[(user, session)] = task_id
        for (user, session), task_id in last.items():  # and its session lists it
            assert task_id in after.session(Scope.user(user), session).active_task_ids
    print(f"committed {len(committed)} turns, {len(clear)} clear errors while down")


def test_the_first_statements_use_the_stores_first_connection(postgres_url: str) -> None:
    """No cold wait for a pooled connection: the connection ``open_store`` made to check the
    schema serves the first statements, while the pool opens its own in the background."""
    from relaystate.store.postgres.store import PostgresStore

    store = open_store(postgres_url)
    backend = store.tasks
    assert isinstance(backend, PostgresStore)
    pool = backend._connections._pool
    try:
        for _ in range(3):
            assert backend.get_key("nobody") is None
        assert pool.get_stats().get("requests_num", 0) == 0  # the pool was not asked
        held = backend._connections._lend()  # a second caller meanwhile takes the pool's
        assert held is not None
        assert backend.get_key("nobody") is None
        assert pool.get_stats().get("requests_num", 0) == 1
        held.close()  # a broken spare is never lent again: calls go to the pool
        backend._connections._spare = held
        assert backend.get_key("nobody") is None and backend._connections._spare is None
    finally:
        store.close()
