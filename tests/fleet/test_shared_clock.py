"""The database server's clock as a runtime reads it (runtime/shared_clock.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from relaystate import Runtime, Scope, open_store
from relaystate.runtime import shared_clock
from relaystate.runtime.shared_clock import SharedClock

SERVER = datetime(2030, 1, 1, tzinfo=UTC)
LOCAL = datetime(2026, 1, 1, tzinfo=UTC)


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_server_time_is_measured_by_the_monotonic_clock_between_readings() -> None:
    ticks, reads = Ticks(), []

    def read() -> datetime:
        reads.append(ticks.now)
        return SERVER + timedelta(seconds=ticks.now - 100)

    clock = SharedClock(read, monotonic=ticks, local=lambda: LOCAL)
    assert clock() == SERVER and len(reads) == 1
    ticks.now += 30  # the host's wall clock may jump meanwhile: not read
    assert clock() == SERVER + timedelta(seconds=30) and len(reads) == 1
    ticks.now += shared_clock.RESAMPLE
    clock()
    assert len(reads) == 2  # read again once a minute, for the drift


def test_a_failed_reading_keeps_the_last_and_never_goes_backwards() -> None:
    ticks, answers = Ticks(), [SERVER]

    def read() -> datetime:
        if not answers:
            raise OSError("the server is away")
        return answers.pop(0)

    clock = SharedClock(read, monotonic=ticks, local=lambda: LOCAL)
    first = clock()
    ticks.now += shared_clock.RESAMPLE + 1
    assert clock() == first + timedelta(seconds=shared_clock.RESAMPLE + 1)  # still measured
    answers.append(SERVER)  # a reading behind what was measured: time does not go back
    ticks.now += shared_clock.RETRY
    later = clock()
    assert later >= first + timedelta(seconds=shared_clock.RESAMPLE + 1)


def test_a_store_without_a_clock_of_its_own_keeps_the_local_one() -> None:
    clock = SharedClock(lambda: None, local=lambda: LOCAL)
    assert clock() == LOCAL and clock.offset is None


def test_a_runtime_over_postgres_takes_the_servers_clock(postgres_url: str) -> None:
    rt = Runtime(open_store(postgres_url), [])
    try:
        assert isinstance(rt.clock, SharedClock)
        with psycopg.connect(postgres_url) as conn:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None and abs((rt.clock() - row[0]).total_seconds()) < 1
        assert rt.clock.offset is not None and abs(rt.clock.offset.total_seconds()) < 1
    finally:
        rt.close()


def test_durability_warnings_say_what_could_lose_acknowledged_turns(postgres_url: str) -> None:
    admin = Scope.admin("test")
    rt = Runtime(open_store(postgres_url), [])
    try:
        assert rt.durability_warnings(admin) == []  # one server, fsync on, commits synchronous
    finally:
        rt.close()
    database = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = off')
    rt = Runtime(open_store(postgres_url), [])
    try:
        (said,) = rt.durability_warnings(admin)
        assert "synchronous_commit is off" in said
    finally:
        rt.close()
    sqlite = Runtime(open_store("memory://"), [])
    assert sqlite.durability_warnings(admin) == []
