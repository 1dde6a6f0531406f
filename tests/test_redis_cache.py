"""The Redis session cache: in front of every embedded store, through expiry and outages.

The cache plays the session role only; the session-role conformance tests (relaystate.testing)
run against it in tests/conformance. These tests are about what only a cache does: TTLs,
rebuilding from the durable store, several caches racing on one session, and Redis going away.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from relaystate import Runtime, Scope, TaskStatus, open_store
from relaystate.demo.ledger import Ledger
from relaystate.errors import NotFound, StoreURLError
from relaystate.model import Message, Session, Task, TaskState, utcnow
from relaystate.store import (
    Backend,
    Commit,
    Coordination,
    InMemoryStore,
    SchemaAdmin,
    SessionStore,
    SQLiteStore,
    Stores,
    TaskStore,
)
from relaystate.store.redis import RedisSessionCache
from relaystate.task.journal import entry_for

from . import services
from .support import Script, order_template

redis = pytest.importorskip("redis")

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope.user("alice")
MALLORY = Scope.user("mallory")
ADMIN = Scope.admin("test")

DURABLE: dict[str, Callable[[Path], Backend]] = {
    "memory": lambda tmp: InMemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "durable.db"),
}


@pytest.fixture(params=list(DURABLE))
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return DURABLE[request.param](tmp_path)


@pytest.fixture
def cache(durable: Backend, redis_url: str) -> Iterator[RedisSessionCache]:
    """The cache in front of each embedded store (closing it closes the store too)."""
    c = RedisSessionCache(durable, redis_url)
    yield c
    c.close()


@pytest.fixture
def stores(durable: Backend, cache: RedisSessionCache) -> Stores:
    """The durable store in every role but the session role, which the cache plays."""
    return Stores.of(durable, sessions=cache)


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


# -- helpers --------------------------------------------------------------------------------
def new_task(task_id: str = "t1", user: str = "alice") -> TaskState:
    task = Task(id=task_id, type="demo", user_id=user, stage="collecting", version=1)
    task.created_at = task.updated_at = T0
    return TaskState(task)


def create(stores: Stores, state: TaskState, **extra: Any) -> TaskState:
    """Commit a new task (with a session and messages, if given) through the bundle."""
    entry = entry_for(None, state, at=state.task.updated_at, actor="test", reason="created")
    stores.commit(Commit(state, 0, list(state.actions), entry, **extra))
    return state


def session(sid: str = "s1", user: str = "alice", ttl: int = 3600) -> Session:
    s = Session(id=sid, user_id=user, ttl_seconds=ttl)
    s.touch(utcnow())
    return s


def said(*texts: str, sid: str = "s1", user: str = "alice") -> list[Message]:
    return [Message(sid, user, "user", t, "t1", T0) for t in texts]


def dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def keys(sid: str = "s1", prefix: str = "relaystate:") -> tuple[str, str]:
    return f"{prefix}session:{{{sid}}}", f"{prefix}messages:{{{sid}}}"


class Spy:
    """Counts calls of chosen durable-store methods."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: object, *names: str) -> None:
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
    cache: RedisSessionCache, raw: Any
) -> None:
    s = session(ttl=600)
    s.expires_at = utcnow() + timedelta(seconds=120)
    cache.write(s)
    assert 110 <= raw.ttl(keys()[0]) <= 120
    old = session("s2", ttl=600)
    old.expires_at = utcnow() - timedelta(hours=1)  # already expired: cached for 1 s at least
    cache.write(old)
    assert raw.ttl(keys("s2")[0]) == 1
    skewed = session("s3", ttl=60)
    skewed.expires_at = utcnow() + timedelta(days=30)  # never longer than its own ttl
    cache.write(skewed)
    assert 55 <= raw.ttl(keys("s3")[0]) <= 60


def test_session_and_messages_are_rebuilt_from_durable_after_expiry(
    durable: Backend, redis_url: str, raw: Any
) -> None:
    cache = RedisSessionCache(durable, redis_url + "?ttl=1")
    assert cache.ttl == 1
    stores = Stores.of(durable, sessions=cache)
    s = session(ttl=3600)
    written = said("hi", "yo")
    state = create(stores, new_task(), session=s, messages=written)
    assert [m.id for m in written] == [1, 2]  # numbered by the durable commit
    before = dicts(cache.messages("s1", ALICE))
    assert [m["text"] for m in before] == ["hi", "yo"]
    assert before == dicts(durable.messages("s1", ALICE)) == dicts(written)
    assert raw.ttl(keys()[0]) == 1 and raw.ttl(keys()[1]) == 1  # ?ttl= beats the session's
    time.sleep(1.3)
    assert raw.exists(*keys()) == 0  # gone from Redis ...
    assert cache.get_session("s1", ALICE) == s  # ... rebuilt from the durable store
    assert raw.exists(keys()[0]) == 1
    assert dicts(cache.messages("s1", ALICE)) == before
    assert raw.exists(keys()[1]) == 1
    # the task never lived in Redis (the cache plays no task role) and the expiry left it be
    assert stores.tasks is durable and stores.sessions is cache
    loaded = stores.tasks.load("t1", ALICE)
    assert loaded is not None and loaded.to_dict() == state.to_dict()
    assert [e.version for e in stores.tasks.journal("t1", ALICE)] == [1]
    assert not [k for k in raw.keys("*") if "t1" in k]
    cache.close()


def test_an_expired_cache_entry_never_resurrects_an_expired_session(
    tmp_path: Path, redis_url: str, raw: Any
) -> None:
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/rt.db", cache=redis_url), [])
    assert isinstance(rt.stores.sessions, RedisSessionCache)
    phone = rt.open_session(ALICE, "phone", ttl=timedelta(seconds=30))
    raw.delete(*keys("phone"))  # evicted from Redis early
    again = rt.open_session(ALICE, "phone")
    assert again.created_at == phone.created_at  # still alive: rebuilt, not replaced
    rt.stores.sessions.write(_expired(again))
    again = rt.open_session(ALICE, "phone")
    assert again.created_at > phone.created_at  # expired: a new session, tasks unaffected
    rt.close()


def _expired(s: Session) -> Session:
    s.expires_at = utcnow() - timedelta(seconds=1)
    return s


# -- isolation ------------------------------------------------------------------------------
def test_another_users_session_is_never_served_from_the_cache(
    stores: Stores, cache: RedisSessionCache, raw: Any
) -> None:
    create(stores, new_task(), session=session(), messages=said("secret"))
    assert cache.get_session("s1", ALICE) is not None
    assert raw.exists(keys()[0]) == 1  # it is cached ...
    assert cache.get_session("s1", MALLORY) is None  # ... and still not mallory's
    assert [m.text for m in cache.messages("s1", ALICE)] == ["secret"]
    assert raw.exists(keys()[1]) == 1
    assert cache.messages("s1", MALLORY) == []
    with pytest.raises(NotFound):  # and mallory cannot overwrite the cached copy either
        cache.write(session("s1", user="mallory"))
    assert cache.get_session("s1", ALICE) is not None
    raw.delete(*keys())  # a miss read by mallory rebuilds alice's entry without leaking it
    assert cache.get_session("s1", MALLORY) is None
    assert cache.messages("s1", MALLORY) == []
    assert [m.text for m in cache.messages("s1", ALICE)] == ["secret"]


# -- recent messages ------------------------------------------------------------------------
def test_only_the_recent_messages_are_kept_and_longer_reads_go_durable(
    durable: Backend, redis_url: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = RedisSessionCache(durable, redis_url, recent=3)
    cache.write(session())
    assert cache.messages("s1", ALICE) == []  # an empty session is cached as such
    assert raw.lrange(keys()[1], 0, -1) == ["^"]
    spy = Spy(monkeypatch, durable, "messages")
    first = said("0", "1")
    cache.write(None, first)
    assert [m.id for m in first] == [1, 2]  # the durable store numbered them ...
    assert [m.text for m in cache.messages("s1", ALICE)] == ["0", "1"]
    assert spy.calls["messages"] == 0  # ... so nothing is read back, and the read is Redis's
    cache.write(None, said("2", "3", "4"))
    assert raw.llen(keys()[1]) == 3  # capped, and no longer the whole session
    got = cache.messages("s1", ALICE, limit=3)
    assert spy.calls["messages"] == 0
    assert dicts(got) == dicts(durable.messages("s1", ALICE, limit=3))
    assert [m.id for m in got] == [3, 4, 5]
    spy.calls["messages"] = 0
    everything = cache.messages("s1", ALICE, limit=10)
    assert spy.calls["messages"] == 1  # more than the tail: the durable store answers
    assert [m.text for m in everything] == ["0", "1", "2", "3", "4"]
    cache.close()


@pytest.fixture
def other(durable: Backend, tmp_path: Path, redis_url: str) -> Iterator[RedisSessionCache]:
    """A second process's cache: the same Redis, the same durable data."""
    twin = durable if isinstance(durable, InMemoryStore) else SQLiteStore(tmp_path / "durable.db")
    c = RedisSessionCache(twin, redis_url)
    yield c
    c.close()


def test_a_copy_that_lands_after_another_caches_write_drops_the_list_instead_of_guessing(
    durable: Backend,
    cache: RedisSessionCache,
    other: RedisSessionCache,
    raw: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "relaystate.store.redis")
    cache.write(session(), said("a"))
    assert [m.text for m in cache.messages("s1", ALICE)] == ["a"]  # fills the list
    real = durable.write
    raced: list[Message] = []

    def racing(s: Session | None, messages: Sequence[Message] = ()) -> None:
        real(s, messages)  # ours is committed and numbered; before our copy reaches Redis ...
        if not raced:
            raced.extend(said("sneaky"))
            other.write(None, raced)  # ... another process writes the session, copy and all

    monkeypatch.setattr(durable, "write", racing)
    ours = said("b")
    cache.write(None, ours)
    monkeypatch.undo()
    assert [m.id for m in ours] == [2] and [m.id for m in raced] == [3]
    assert raw.exists(keys()[1]) == 0  # our copy is older than the list's tail: dropped
    got = cache.messages("s1", ALICE)
    assert [m.text for m in got] == ["a", "b", "sneaky"]
    assert dicts(got) == dicts(durable.messages("s1", ADMIN))
    assert dicts(other.messages("s1", ALICE)) == dicts(got)
    assert not caplog.records  # dropped by the script's own check, not by a failing write


def test_a_copy_that_never_reached_redis_is_not_papered_over_by_the_next_write(
    durable: Backend, cache: RedisSessionCache, other: RedisSessionCache, raw: Any
) -> None:
    """A process that committed a message and died before copying it leaves a gap: the next
    writer's copy must not be appended after the gap into a list that claims to be whole."""
    cache.write(session(), said("a"))
    assert [m.text for m in cache.messages("s1", ALICE)] == ["a"]  # fills the list (whole)
    durable.write(None, said("lost copy"))  # committed durably; its copy never ran
    other.write(None, said("c"))
    assert raw.exists(keys()[1]) == 0  # 3 does not follow 1: dropped, not guessed
    got = cache.messages("s1", ALICE)
    assert [(m.id, m.text) for m in got] == [(1, "a"), (2, "lost copy"), (3, "c")]
    assert dicts(got) == dicts(durable.messages("s1", ADMIN))


def test_messages_the_durable_store_left_unnumbered_drop_the_list(
    durable: Backend,
    cache: RedisSessionCache,
    raw: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "relaystate.store.redis")
    cache.write(session(), said("a"))
    assert [m.text for m in cache.messages("s1", ALICE)] == ["a"]
    real = durable.write

    def unnumbered(s: Session | None, messages: Sequence[Message] = ()) -> None:
        real(s, [Message.from_dict(m.to_dict()) for m in messages])  # ids set on copies

    monkeypatch.setattr(durable, "write", unnumbered)
    ours = said("b")
    cache.write(None, ours)
    monkeypatch.undo()
    assert ours[0].id is None
    assert raw.exists(keys()[1]) == 0  # ids unknown: the list is dropped, not guessed
    got = cache.messages("s1", ALICE)
    assert [m.text for m in got] == ["a", "b"]
    assert dicts(got) == dicts(durable.messages("s1", ADMIN))
    assert not caplog.records  # dropped by design, not by a failing write


def test_concurrent_writers_and_readers_leave_the_cache_equal_to_durable(
    tmp_path: Path, redis_url: str
) -> None:
    path = tmp_path / "shared.db"
    caches = [RedisSessionCache(SQLiteStore(path), redis_url, recent=5) for _ in range(4)]
    caches[0].write(session())
    errors: list[BaseException] = []

    def work(cache: RedisSessionCache, n: int) -> None:
        try:
            for i in range(15):
                cache.write(None, said(f"{n}.{i}"))
                cache.messages("s1", ALICE, limit=3)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c, n)) for n, c in enumerate(caches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    durable = caches[0].durable
    assert [m.id for m in durable.messages("s1", ADMIN, limit=100)] == list(range(1, 61))
    want = dicts(durable.messages("s1", ALICE, limit=5))
    for c in caches:
        assert dicts(c.messages("s1", ALICE, limit=5)) == want
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
        s = rt.open_session(ALICE)
        tid = rt.start(
            ALICE, "order", session_id=s.id, slots={"item": "tea"}, messages=[("user", "tea")]
        ).task.id
        assert [m.text for m in rt.messages(ALICE, s.id)] == ["tea"]
    # the Redis server is gone now
    caplog.set_level(logging.WARNING, "relaystate.store.redis")
    started = time.monotonic()
    state = rt.fill(ALICE, tid, {"size": "M"}, session_id=s.id, messages=[("user", "M")])
    state = rt.confirm(ALICE, tid, session_id=s.id, messages=[("user", "yes")])
    assert state.task.status == TaskStatus.DONE
    assert [m.text for m in rt.messages(ALICE, s.id)] == ["tea", "M", "yes"]
    cache = rt.stores.sessions
    assert isinstance(cache, RedisSessionCache)
    stored = cache.get_session(s.id, ALICE)
    assert stored is not None and stored.active_task_ids == [tid]
    assert rt.open_session(ALICE, s.id).created_at == s.created_at
    assert time.monotonic() - started < 5  # no stall on the dead server
    assert any("using the durable store" in r.getMessage() for r in caplog.records)
    # the server comes back (empty, on the same port): after the pause the cache is used again
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with services.redis(port):
        cache._down_until = 0  # skip the back-off pause
        assert [m.text for m in rt.messages(ALICE, s.id)] == ["tea", "M", "yes"]
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.exists(keys(s.id)[1]) == 1
        assert cache.get_session(s.id, ALICE) == cache.durable.get_session(s.id, ALICE)
        assert client.exists(keys(s.id)[0]) == 1
        client.close()
        rt.close()


def test_a_failed_cache_write_is_invalidated_once_redis_answers_again(
    stores: Stores, cache: RedisSessionCache, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(stores, new_task(), session=session(), messages=said("one"))
    assert [m.text for m in cache.messages("s1", ALICE)] == ["one"]
    assert cache.get_session("s1", ALICE) is not None

    def broken(**_: Any) -> None:
        raise redis.ConnectionError("network partition")

    monkeypatch.setattr(cache, "_write", broken)
    newer = session()
    newer.version = 1  # the session as the commit above left it
    newer.language = "zh"
    cache.write(newer)  # durable succeeds; the cached copy is now stale
    cache.write(None, said("two"))
    assert cache.get_session("s1", ALICE) == newer  # Redis left alone: durable
    monkeypatch.undo()
    cache._down_until = 0  # the back-off is over
    assert cache.get_session("s1", ALICE) == newer  # stale copy was dropped first
    assert [m.text for m in cache.messages("s1", ALICE)] == ["one", "two"]
    assert raw.exists(*keys()) == 2


# -- a whole runtime through the cache --------------------------------------------------------
def test_runtime_turns_through_the_cache_take_at_most_two_round_trips(
    tmp_path: Path, redis_url: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    stores = open_store(f"sqlite:///{tmp_path}/rt.db", cache=redis_url)
    cache = stores.sessions
    assert isinstance(cache, RedisSessionCache)
    assert cache.durable is stores.tasks  # so the turn's messages commit with its task
    assert stores.url == cache.url == f"sqlite:///{tmp_path}/rt.db"
    rt = Runtime(stores, [order_template(ledger, Script())])
    s = rt.open_session(ALICE)
    state = rt.start(
        ALICE, "order", session_id=s.id, slots={"item": "tea"}, messages=[("user", "tea")]
    )
    assert [m.text for m in rt.messages(ALICE, s.id)] == ["tea"]  # fills the list
    spy = Spy(monkeypatch, cache.durable, "messages", "get_session")
    with round_trips(monkeypatch) as sent:
        rt.fill(
            ALICE,
            state.task.id,
            {"size": "medium"},
            session_id=s.id,
            messages=[("user", "medium"), ("bot", "confirm?")],
        )
    assert len(sent) <= 2, sent  # the session read, then one script for session + messages
    with round_trips(monkeypatch) as sent:
        done = rt.confirm(ALICE, state.task.id, session_id=s.id, messages=[("user", "yes")])
    assert len(sent) <= 2, sent
    assert done.task.status == TaskStatus.DONE
    with round_trips(monkeypatch) as sent:
        shown = rt.messages(ALICE, s.id)
    assert len(sent) == 1
    assert spy.calls == {"messages": 0, "get_session": 0}  # the commit numbered the messages
    assert [m.text for m in shown] == ["tea", "medium", "confirm?", "yes"]
    assert dicts(shown) == dicts(cache.durable.messages(s.id, ALICE))
    cached = cache.get_session(s.id, ALICE)
    assert cached is not None and cached.active_task_ids == [state.task.id]
    assert raw.exists(*keys(s.id)) == 2
    rt.close()


# -- configuration --------------------------------------------------------------------------
def test_url_options_repr_and_errors(durable: Backend, redis_url: str, raw: Any) -> None:
    cache = RedisSessionCache(durable, redis_url + "?ttl=7&recent=4&prefix=app:")
    assert (cache.ttl, cache.recent, cache.prefix) == (7, 4, "app:")
    cache.write(session())
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
    durable.write(session())
    cache = RedisSessionCache(durable, f"redis://127.0.0.1:{services.free_port()}/0")
    pauses = []
    for _ in range(4):
        cache._down_until = 0  # as if the pause were over
        assert cache.get_session("s1", ALICE) is not None  # from the durable store
        pauses.append(round(cache._down_until - time.monotonic()))
    assert pauses == [1, 2, 4, 8]
    assert cache.get_session("s1", ALICE) is not None  # paused: not even tried
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 4
    cache.close()


# -- the session role, and only that ----------------------------------------------------------
def test_every_session_method_is_its_own_not_inherited() -> None:
    public = {
        n for n in dir(SessionStore) if not n.startswith("_") and callable(getattr(SessionStore, n))
    }
    assert {"get_session", "write", "messages", "committed", "close"} <= public
    assert public <= set(vars(RedisSessionCache)), public - set(vars(RedisSessionCache))


def test_the_cache_plays_no_other_role() -> None:
    for role in (TaskStore, Coordination, SchemaAdmin):
        assert not issubclass(RedisSessionCache, role), role
        passthroughs = set(role.__abstractmethods__) & set(dir(RedisSessionCache))
        assert not passthroughs, (role, passthroughs)


def test_tasks_workers_and_schema_go_to_the_durable_store(tmp_path: Path, redis_url: str) -> None:
    stores = open_store(f"sqlite:///{tmp_path}/s.db", cache=redis_url)
    assert isinstance(stores.sessions, RedisSessionCache)
    durable = stores.sessions.durable
    assert isinstance(durable, SQLiteStore)
    assert stores.tasks is stores.coordination is stores.schema is durable
    assert stores.schema.schema_status() is not None
    assert stores.schema.upgrade_schema() == []
    stores.close()
