"""The Redis session cache: in front of every embedded store, through expiry and outages."""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from relaystate import Runtime, Scope, TaskStatus, open_store
from relaystate.demo.ledger import Ledger
from relaystate.errors import NotFound, StoreURLError
from relaystate.model import Message, Session, utcnow
from relaystate.store import InMemoryStore, SQLiteStore, Store
from relaystate.store.redis import RedisSessionCache

from . import services
from .conformance import test_store as conformance
from .conformance.test_store import T0, create, new_task
from .support import Script, order_template

redis = pytest.importorskip("redis")

DURABLE: dict[str, Callable[[Path], Store]] = {
    "memory": lambda tmp: InMemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "durable.db"),
}


@pytest.fixture(params=list(DURABLE))
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return DURABLE[request.param](tmp_path)


@pytest.fixture
def store(durable: Store, redis_url: str) -> Iterator[RedisSessionCache]:
    """The cache in front of each embedded store (the conformance suite below runs on it)."""
    cache = RedisSessionCache(durable, redis_url)
    yield cache
    cache.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


# -- the shared store contract, unchanged, with the cache in front of memory and SQLite -----
test_contract_create_and_read_back = conformance.test_create_and_read_back
test_contract_reads_are_scoped_by_user = conformance.test_reads_are_scoped_by_user
test_contract_stale_version = conformance.test_stale_version_conflicts_and_changes_nothing
test_contract_existing_task = conformance.test_creating_an_existing_task_conflicts
test_contract_owner_is_fixed = conformance.test_a_task_cannot_be_moved_to_another_user
test_contract_actions_upserted = conformance.test_actions_are_upserted_with_the_task
test_contract_duplicate_key = conformance.test_duplicate_idempotency_key_rolls_back_the_whole_commit
test_contract_list_tasks = conformance.test_list_tasks_filters_orders_and_limits
test_contract_open_actions = conformance.test_open_actions_are_the_unsettled_ones
test_contract_journal = conformance.test_journal_is_ordered_and_paged_by_version
test_contract_compaction = conformance.test_compaction_keeps_a_baseline_and_drops_folded_entries
test_contract_sessions = conformance.test_sessions_are_scoped_and_owned
test_contract_messages = conformance.test_messages_commit_with_the_task_and_after_it
test_contract_workers = conformance.test_workers_register_and_deregister


# -- helpers --------------------------------------------------------------------------------
def session(sid: str = "s1", user: str = "alice", ttl: int = 3600) -> Session:
    s = Session(id=sid, user_id=user, ttl_seconds=ttl)
    s.touch(utcnow())
    return s


def said(*texts: str, sid: str = "s1", user: str = "alice") -> list[Message]:
    return [Message(sid, user, "user", t, "t1", T0) for t in texts]


def keys(sid: str = "s1", prefix: str = "relaystate:") -> tuple[str, str]:
    return f"{prefix}session:{{{sid}}}", f"{prefix}messages:{{{sid}}}"


class Spy:
    """Counts calls of chosen durable-store methods."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: Store, *names: str) -> None:
        self.calls: dict[str, int] = dict.fromkeys(names, 0)
        for name in names:
            real = getattr(store, name)

            def counted(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
                self.calls[_name] += 1
                return _real(*a, **kw)

            monkeypatch.setattr(store, name, counted)


@contextlib.contextmanager
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every request sent to any Redis (a pipeline or script is one), by first command."""
    sent: list[str] = []
    connection = redis.connection.AbstractConnection
    real = connection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> Any:
        first = command[0] if isinstance(command, list) else command
        sent.append(bytes(first)[:40].decode(errors="replace"))
        return real(self, command, check_health)

    with monkeypatch.context() as m:
        m.setattr(connection, "send_packed_command", counted)
        yield sent


# -- TTL and expiry -------------------------------------------------------------------------
def test_cached_copy_lives_as_long_as_the_session_has_left(
    store: RedisSessionCache, raw: Any
) -> None:
    s = session(ttl=600)
    s.expires_at = utcnow() + timedelta(seconds=120)
    store.put_session(s)
    assert 110 <= raw.ttl(keys()[0]) <= 120
    old = session("s2", ttl=600)
    old.expires_at = utcnow() - timedelta(hours=1)  # already expired: cached for 1 s at least
    store.put_session(old)
    assert raw.ttl(keys("s2")[0]) == 1
    skewed = session("s3", ttl=60)
    skewed.expires_at = utcnow() + timedelta(days=30)  # never longer than its own ttl
    store.put_session(skewed)
    assert 55 <= raw.ttl(keys("s3")[0]) <= 60


def test_session_and_messages_are_rebuilt_from_durable_after_expiry(
    durable: Store, redis_url: str, raw: Any
) -> None:
    cache = RedisSessionCache(durable, redis_url + "?ttl=1")
    assert cache.ttl == 1
    s = session(ttl=3600)
    state = create(cache, new_task(), session=s, messages=said("hi", "yo"))
    before = [m.to_dict() for m in cache.messages("s1", user_id="alice")]
    assert [m["text"] for m in before] == ["hi", "yo"]
    assert before == [m.to_dict() for m in durable.messages("s1", user_id="alice")]
    assert raw.ttl(keys()[0]) == 1 and raw.ttl(keys()[1]) == 1  # ?ttl= beats the session's
    time.sleep(1.3)
    assert raw.exists(*keys()) == 0  # gone from Redis ...
    assert cache.get_session("s1", user_id="alice") == s  # ... rebuilt from the durable store
    assert raw.exists(keys()[0]) == 1
    assert [m.to_dict() for m in cache.messages("s1", user_id="alice")] == before
    assert raw.exists(keys()[1]) == 1
    # the task never lived in Redis and is untouched by the expiry
    loaded = cache.load("t1", user_id="alice")
    assert loaded is not None and loaded.to_dict() == state.to_dict()
    assert [e.version for e in cache.journal("t1")] == [1]
    assert not [k for k in raw.keys("*") if "t1" in k]
    cache.close()


def test_an_expired_cache_entry_never_resurrects_an_expired_session(
    tmp_path: Path, redis_url: str, raw: Any
) -> None:
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/rt.db", cache=redis_url), [])
    phone = rt.open_session(Scope.user("alice"), "phone", ttl=timedelta(seconds=30))
    raw.delete(*keys("phone"))  # evicted from Redis early
    again = rt.open_session(Scope.user("alice"), "phone")
    assert again.created_at == phone.created_at  # still alive: rebuilt, not replaced
    rt.store.put_session(_expired(again))
    again = rt.open_session(Scope.user("alice"), "phone")
    assert again.created_at > phone.created_at  # expired: a new session, tasks unaffected
    rt.close()


def _expired(s: Session) -> Session:
    s.expires_at = utcnow() - timedelta(seconds=1)
    return s


# -- isolation ------------------------------------------------------------------------------
def test_another_users_session_is_never_served_from_the_cache(
    store: RedisSessionCache, raw: Any
) -> None:
    create(store, new_task(), session=session(), messages=said("secret"))
    assert store.get_session("s1", user_id="alice") is not None
    assert raw.exists(keys()[0]) == 1  # it is cached ...
    assert store.get_session("s1", user_id="mallory") is None  # ... and still not mallory's
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["secret"]
    assert raw.exists(keys()[1]) == 1
    assert store.messages("s1", user_id="mallory") == []
    with pytest.raises(NotFound):  # and mallory cannot overwrite the cached copy either
        store.put_session(session("s1", user="mallory"))
    assert store.get_session("s1", user_id="alice") is not None
    raw.delete(*keys())  # a miss read by mallory rebuilds alice's entry without leaking it
    assert store.get_session("s1", user_id="mallory") is None
    assert store.messages("s1", user_id="mallory") == []
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["secret"]


# -- recent messages ------------------------------------------------------------------------
def test_only_the_recent_messages_are_kept_and_longer_reads_go_durable(
    durable: Store, redis_url: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = RedisSessionCache(durable, redis_url, recent=3)
    cache.put_session(session())
    assert cache.messages("s1", user_id="alice") == []  # an empty session is cached as such
    assert raw.lrange(keys()[1], 0, -1) == ["^"]
    spy = Spy(monkeypatch, durable, "messages")
    cache.append_messages(said("0", "1"))
    assert [m.text for m in cache.messages("s1", user_id="alice")] == ["0", "1"]
    assert spy.calls["messages"] == 1  # the read-back of the new ids, nothing else
    cache.append_messages(said("2", "3", "4"))
    assert raw.llen(keys()[1]) == 3  # capped, and no longer the whole session
    got = cache.messages("s1", user_id="alice", limit=3)
    assert spy.calls["messages"] == 2
    assert [m.to_dict() for m in got] == [
        m.to_dict() for m in durable.messages("s1", user_id="alice", limit=3)
    ]
    everything = cache.messages("s1", user_id="alice", limit=10)
    assert [m.text for m in everything] == ["0", "1", "2", "3", "4"]
    cache.close()


def test_a_writer_that_lands_in_between_drops_the_list_instead_of_guessing(
    durable: Store, store: RedisSessionCache, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put_session(session())
    store.append_messages(said("a"))
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["a"]
    real = durable.append_messages

    def racing(messages: Any) -> None:
        real(messages)
        real(said("sneaky"))  # another process appends before our read-back

    monkeypatch.setattr(durable, "append_messages", racing)
    store.append_messages(said("b"))
    monkeypatch.undo()
    assert raw.exists(keys()[1]) == 0  # ids unknown: the list is dropped, not guessed
    got = store.messages("s1", user_id="alice")
    assert [m.text for m in got] == ["a", "b", "sneaky"]
    assert [m.to_dict() for m in got] == [m.to_dict() for m in durable.messages("s1", user_id=None)]


def test_concurrent_writers_and_readers_leave_the_cache_equal_to_durable(
    tmp_path: Path, redis_url: str
) -> None:
    path = tmp_path / "shared.db"
    caches = [RedisSessionCache(SQLiteStore(path), redis_url, recent=5) for _ in range(4)]
    caches[0].put_session(session())
    errors: list[BaseException] = []

    def work(cache: RedisSessionCache, n: int) -> None:
        try:
            for i in range(15):
                cache.append_messages(said(f"{n}.{i}"))
                cache.messages("s1", user_id="alice", limit=3)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c, n)) for n, c in enumerate(caches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    durable = caches[0].durable
    want = [m.to_dict() for m in durable.messages("s1", user_id="alice", limit=5)]
    assert [m.to_dict() for m in caches[1].messages("s1", user_id="alice", limit=5)] == want
    for c in caches:
        c.close()


# -- Redis failing --------------------------------------------------------------------------
def test_turns_commit_and_reads_fall_back_when_redis_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with contextlib.ExitStack() as server:
        try:
            url = server.enter_context(services.redis())
        except services.Unavailable as exc:
            pytest.skip(str(exc))
        ledger = Ledger(tmp_path / "ledger.db")
        rt = Runtime(
            open_store(f"sqlite:///{tmp_path}/rt.db", cache=url),
            [order_template(ledger, Script())],
        )
        s = rt.open_session(Scope.user("alice"))
        tid = rt.start(
            Scope.user("alice"),
            "order",
            session_id=s.id,
            slots={"item": "tea"},
            messages=[("user", "tea")],
        ).task.id
        assert [m.text for m in rt.messages(Scope.user("alice"), s.id)] == ["tea"]
    # the Redis server is gone now
    caplog.set_level(logging.WARNING, "relaystate.store.redis")
    started = time.monotonic()
    state = rt.fill(
        Scope.user("alice"), tid, {"size": "M"}, session_id=s.id, messages=[("user", "M")]
    )
    state = rt.confirm(Scope.user("alice"), tid, session_id=s.id, messages=[("user", "yes")])
    assert state.task.status == TaskStatus.DONE
    assert [m.text for m in rt.messages(Scope.user("alice"), s.id)] == ["tea", "M", "yes"]
    stored = rt.store.get_session(s.id, user_id="alice")
    assert stored is not None and stored.active_task_ids == [tid]
    assert rt.open_session(Scope.user("alice"), s.id).created_at == s.created_at
    assert time.monotonic() - started < 5  # no stall on the dead server
    assert any("using the durable store" in r.getMessage() for r in caplog.records)
    # the server comes back (empty, on the same port): after the pause the cache is used again
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with _redis_server(port):
        cache = rt.store
        assert isinstance(cache, RedisSessionCache)
        cache._down_until = 0  # skip the back-off pause
        assert [m.text for m in rt.messages(Scope.user("alice"), s.id)] == ["tea", "M", "yes"]
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.exists(keys(s.id)[1]) == 1
        assert cache.get_session(s.id, user_id="alice") == cache.durable.get_session(
            s.id, user_id="alice"
        )
        assert client.exists(keys(s.id)[0]) == 1
        client.close()
        rt.close()


@contextlib.contextmanager
def _redis_server(port: int) -> Iterator[None]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert time.monotonic() < deadline and proc.poll() is None, "redis did not restart"
            time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_failed_cache_write_is_invalidated_once_redis_answers_again(
    store: RedisSessionCache, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(store, new_task(), session=session(), messages=said("one"))
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["one"]
    assert store.get_session("s1", user_id="alice") is not None

    def broken(**_: Any) -> None:
        raise redis.ConnectionError("network partition")

    monkeypatch.setattr(store, "_write", broken)
    newer = session()
    newer.language = "zh"
    store.put_session(newer)  # durable succeeds; the cached copy is now stale
    store.append_messages(said("two"))
    assert store.get_session("s1", user_id="alice") == newer  # Redis left alone: durable
    monkeypatch.undo()
    store._down_until = 0  # the back-off is over
    assert store.get_session("s1", user_id="alice") == newer  # stale copy was dropped first
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["one", "two"]
    assert raw.exists(*keys()) == 2


# -- a whole runtime through the cache --------------------------------------------------------
def test_runtime_turns_through_the_cache_take_at_most_two_round_trips(
    tmp_path: Path, redis_url: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    store = open_store(f"sqlite:///{tmp_path}/rt.db", cache=redis_url)
    assert isinstance(store, RedisSessionCache) and store.url == f"sqlite:///{tmp_path}/rt.db"
    rt = Runtime(store, [order_template(ledger, Script())])
    s = rt.open_session(Scope.user("alice"))
    state = rt.start(
        Scope.user("alice"),
        "order",
        session_id=s.id,
        slots={"item": "tea"},
        messages=[("user", "tea")],
    )
    assert [m.text for m in rt.messages(Scope.user("alice"), s.id)] == ["tea"]  # fills the list
    spy = Spy(monkeypatch, store.durable, "messages", "get_session")
    with round_trips(monkeypatch) as sent:
        rt.fill(
            Scope.user("alice"),
            state.task.id,
            {"size": "medium"},
            session_id=s.id,
            messages=[("user", "medium"), ("bot", "confirm?")],
        )
    assert len(sent) <= 2, sent  # the session read, then one script for session + messages
    with round_trips(monkeypatch) as sent:
        done = rt.confirm(
            Scope.user("alice"), state.task.id, session_id=s.id, messages=[("user", "yes")]
        )
    assert len(sent) <= 2, sent
    assert done.task.status == TaskStatus.DONE
    with round_trips(monkeypatch) as sent:
        shown = rt.messages(Scope.user("alice"), s.id)
    assert len(sent) == 1
    assert spy.calls == {"messages": 2, "get_session": 0}  # only the two id read-backs
    assert [m.text for m in shown] == ["tea", "medium", "confirm?", "yes"]
    durable = [m.to_dict() for m in store.durable.messages(s.id, user_id="alice")]
    assert [m.to_dict() for m in shown] == durable
    cached = rt.store.get_session(s.id, user_id="alice")
    assert cached is not None and cached.active_task_ids == [state.task.id]
    assert raw.exists(*keys(s.id)) == 2
    rt.close()


# -- configuration --------------------------------------------------------------------------
def test_url_options_repr_and_errors(durable: Store, redis_url: str, raw: Any) -> None:
    cache = RedisSessionCache(durable, redis_url + "?ttl=7&recent=4&prefix=app:")
    assert (cache.ttl, cache.recent, cache.prefix) == (7, 4, "app:")
    cache.put_session(session())
    assert raw.ttl(keys(prefix="app:")[0]) == 7
    assert cache.url == durable.url
    assert repr(cache) == (
        f"RedisSessionCache(durable={durable.url!r}, cache={redis_url!r}, ttl=7s, recent=4)"
    )
    cache.close()
    secret = RedisSessionCache(InMemoryStore(), "redis://:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in repr(secret) and "***" in repr(secret)
    secret.close()
    for bad in ("?ttl=0", "?ttl=soon", "?recent=-1"):
        with pytest.raises(StoreURLError):
            RedisSessionCache(InMemoryStore(), redis_url + bad)
    with pytest.raises(StoreURLError):
        open_store("memory://", cache="memcached://localhost")


def test_an_unreachable_redis_is_left_alone_longer_each_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    durable = InMemoryStore()
    durable.put_session(session())
    cache = RedisSessionCache(durable, f"redis://127.0.0.1:{services.free_port()}/0")
    pauses = []
    for _ in range(4):
        cache._down_until = 0  # as if the pause were over
        assert cache.get_session("s1", user_id="alice") is not None  # from the durable store
        pauses.append(round(cache._down_until - time.monotonic()))
    assert pauses == [1, 2, 4, 8]
    assert cache.get_session("s1", user_id="alice") is not None  # paused: not even tried
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 4
    cache.close()


def test_every_store_method_is_delegated_not_inherited() -> None:
    public = {n for n, v in vars(Store).items() if callable(v) and not n.startswith("_")}
    assert public <= set(vars(RedisSessionCache)), public - set(vars(RedisSessionCache))


def test_schema_questions_go_to_the_durable_store(tmp_path: Path, redis_url: str) -> None:
    cache = open_store(f"sqlite:///{tmp_path}/s.db", cache=redis_url)
    assert isinstance(cache, RedisSessionCache)
    assert cache.schema_status() == cache.durable.schema_status() is not None
    assert cache.upgrade_schema() == []
    cache.close()
