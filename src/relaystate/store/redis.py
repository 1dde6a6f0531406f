"""Hot sessions and recent messages in Redis, in front of a durable store.

This is the session role alone (:class:`~relaystate.store.roles.SessionStore`); tasks,
actions, the journal and workers stay with the durable store. Every write goes to the
durable store first, unchanged: a turn's task, actions, journal entry, session and messages
stay one durable transaction, and the cache is told afterwards (``committed``). Only then
are the session and the new messages copied into Redis, in one round trip (a Lua script, so
the copy is atomic too), with a TTL: the session's remaining lifetime, or ``?ttl=SECONDS``
on the Redis URL.

Redis is only a cache. An entry that expired, was evicted or was never written is rebuilt from
the durable store by the next read. A Redis that is down or failing costs speed, never a turn
or a record: the error is logged, the session's cached copy is invalidated as soon as Redis
answers again, and reads use the durable store meanwhile. Tasks, actions, the journal and
workers never touch Redis, so nothing expiring there can take a task with it.

Keys (``{id}`` is a hash tag: the keys of one session would share a Redis Cluster slot):

``<prefix>session:{id}``
    the session as JSON.
``<prefix>messages:{id}``
    its last ``recent`` messages as JSON, oldest first, carrying the durable store's ids; a
    leading ``^`` entry means the list is the whole conversation, not only its tail.
``<prefix>written:{id}``
    a counter every message write bumps, so a reader that rebuilt the list from an older
    durable read never installs it over a newer write.

URL options (removed before the URL reaches redis-py): ``ttl`` (seconds; overrides the
session's own remaining TTL for the cached copy), ``recent`` (messages kept per session) and
``prefix``, e.g. ``redis://localhost:6379/0?ttl=900``. Connect and socket timeouts default to
one second and a failed command is retried once, at once; redis-py's own URL options (e.g.
``socket_timeout``) still apply.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import StoreURLError
from ..model import Message, Session, utcnow
from ..scope import Scope
from .roles import SessionStore
from .turn_memory import Remember

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError:  # pragma: no cover - only the error message is exercised
    _HAVE_REDIS = False
else:
    _HAVE_REDIS = True

log = logging.getLogger(__name__)

FALLBACK_TTL = 3600
"""Seconds a message list lives when neither ``ttl`` nor a cached session gives its TTL."""
RETRY_AFTER = 1.0
"""Seconds to leave Redis alone after it could not be reached (reads use the durable store)."""
MAX_RETRY_AFTER = 30.0
"""The longest such pause while Redis stays unreachable."""
MAX_STALE = 10_000
"""Sessions remembered for invalidation while Redis is unreachable, per process."""
WHOLE = "^"
"""First entry of a message list that holds every message of its session."""

# KEYS: session, messages, written.
# ARGV: session JSON ('' for none), its TTL ('' to keep the cached session's), fallback TTL,
#       recent, mode ('' = session only, 'append' = messages with known ids, 'drop' = messages
#       whose ids are unknown), then the messages' JSON.
_WRITE = """
local ttl = tonumber(ARGV[2])
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
end
if not ttl then
  ttl = redis.call('TTL', KEYS[1])
  if ttl <= 0 then ttl = tonumber(ARGV[3]) end
end
local mode = ARGV[5]
if mode ~= '' then
  redis.call('INCR', KEYS[3])
  redis.call('EXPIRE', KEYS[3], math.max(ttl, 300))
end
if mode == 'drop' then
  redis.call('DEL', KEYS[2])
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
if mode == 'append' then
  -- Messages are numbered 1, 2, ... per session: the new ones must follow the tail at once,
  -- else another writer's copy is missing (or late) and the list is dropped, not guessed.
  local tail = redis.call('LINDEX', KEYS[2], -1)
  local last = 0
  if tail ~= '^' then last = cjson.decode(tail)['id'] end
  if cjson.decode(ARGV[6])['id'] ~= last + 1 then
    redis.call('DEL', KEYS[2])
    return 0
  end
  redis.call('RPUSH', KEYS[2], unpack(ARGV, 6))
  local recent = tonumber(ARGV[4])
  local n = redis.call('LLEN', KEYS[2])
  if n > recent and (n > recent + 1 or redis.call('LINDEX', KEYS[2], 0) ~= '^') then
    redis.call('LTRIM', KEYS[2], -recent, -1)
  end
end
redis.call('EXPIRE', KEYS[2], ttl)
return 1
"""

# KEYS: messages, written, session. ARGV: the written counter the reader saw ('' for none),
# fallback TTL, then the list's entries.
_FILL = """
local seen = redis.call('GET', KEYS[2]) or ''
if seen ~= ARGV[1] or redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local ttl = redis.call('TTL', KEYS[3])
if ttl <= 0 then ttl = tonumber(ARGV[2]) end
redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ttl)
return 1
"""


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _positive(options: dict[str, str], name: str) -> int | None:
    if name not in options:
        return None
    try:
        value = int(options[name])
    except ValueError:
        value = 0
    if value < 1:
        raise StoreURLError(f"cache option {name}={options[name]!r}: expected a whole number >= 1")
    return value


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class RedisSessionCache(SessionStore):
    """The session role, played by Redis in front of a durable session store.

    ``durable`` stays the only source of truth. ``ttl``
    (seconds) replaces each session's remaining lifetime as the TTL of its cached copy;
    ``recent`` is how many messages per session are kept; options in the URL's query win over
    these arguments. ``clock`` must tell the same time as the runtime's clock, since a
    session's remaining lifetime is its ``expires_at`` minus now.
    """

    def __init__(
        self,
        durable: SessionStore,
        url: str,
        *,
        ttl: int | None = None,
        recent: int = 50,
        prefix: str = "relaystate:",
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not _HAVE_REDIS:
            raise StoreURLError(
                "the Redis session cache needs the redis package: pip install 'relaystate[redis]'"
            )
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        options = {k: v for k, v in query if k in ("ttl", "recent", "prefix")}
        rest = [(k, v) for k, v in query if k not in options]
        self.ttl = _positive(options, "ttl") or ttl
        self.recent = _positive(options, "recent") or recent
        self.prefix = options.get("prefix", prefix)
        if (self.ttl is not None and self.ttl < 1) or self.recent < 1:
            raise ValueError("ttl and recent must be at least 1")
        redis_url = urlunsplit(parts._replace(query=urlencode(rest)))
        try:
            client = redis.Redis.from_url(
                redis_url,
                decode_responses=True,
                socket_connect_timeout=1.0,
                socket_timeout=1.0,
                # One immediate retry heals a pooled connection a Redis restart broke; the
                # library default (ten, with backoff) would stall every turn while it is down.
                retry=Retry(NoBackoff(), 1),
            )
        except ValueError as exc:
            raise StoreURLError(f"bad cache URL {_redacted(url)!r}: {exc}") from None
        self.durable = durable
        self.url = durable.url
        self.capabilities = durable.capabilities
        self.cache_url = _redacted(redis_url)
        self._redis = client
        self._write = client.register_script(_WRITE)
        self._fill = client.register_script(_FILL)
        self._clock = clock
        self._lock = threading.Lock()
        self._stale: set[str] = set()
        self._down_until = 0.0
        self._failures = 0

    def __repr__(self) -> str:
        ttl = "session" if self.ttl is None else f"{self.ttl}s"
        return (
            f"RedisSessionCache(durable={self.durable.url!r}, cache={self.cache_url!r}, "
            f"ttl={ttl}, recent={self.recent})"
        )

    # -- keys and health -----------------------------------------------------------------
    def _keys(self, session_id: str) -> tuple[str, str, str]:
        tag = "{" + session_id + "}"
        p = self.prefix
        return f"{p}session:{tag}", f"{p}messages:{tag}", f"{p}written:{tag}"

    def _available(self) -> bool:
        """Whether to talk to Redis now.

        After Redis could not be reached it is left alone for a while (one second, doubling
        up to half a minute while it stays away), then probed once; the probe is the deletion
        of whatever failed writes left stale, so those copies are gone before anything is read.
        """
        if time.monotonic() < self._down_until:
            return False
        with self._lock:
            stale = list(self._stale)
        if not stale and not self._failures:
            return True
        try:
            if stale:
                self._redis.delete(*[k for sid in stale for k in self._keys(sid)[:2]])
            else:
                self._redis.ping()
        except redis.RedisError as exc:
            self._failed("reconnecting" if not stale else "invalidating stale sessions", exc)
            return False
        with self._lock:
            self._stale.difference_update(stale)
        if self._failures:
            log.warning("redis session cache at %s: reachable again", self.cache_url)
        self._failures = 0
        return True

    def _failed(self, what: str, exc: Exception) -> None:
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
            pause = min(RETRY_AFTER * 2**self._failures, MAX_RETRY_AFTER)
            self._failures += 1
            self._down_until = time.monotonic() + pause
        log.warning(
            "redis session cache at %s: %s failed (%s: %s); using the durable store",
            self.cache_url,
            what,
            type(exc).__name__,
            exc,
        )

    def _mark_stale(self, session_ids: Iterable[str]) -> None:
        with self._lock:
            self._stale.update(session_ids)
            if len(self._stale) > MAX_STALE:
                log.error(
                    "redis session cache: over %d sessions await invalidation; some cached "
                    "sessions may stay stale until their TTL",
                    MAX_STALE,
                )
                while len(self._stale) > MAX_STALE:
                    self._stale.pop()

    def _invalidate(self, session_ids: Iterable[str]) -> None:
        """Drop cached copies now if Redis answers, else as soon as it does."""
        ids = set(session_ids)
        try:
            if time.monotonic() >= self._down_until:
                self._redis.delete(*[k for sid in ids for k in self._keys(sid)[:2]])
                return
        except redis.RedisError as exc:
            self._failed("invalidating", exc)
        self._mark_stale(ids)

    def _session_ttl(self, session: Session) -> int:
        if self.ttl is not None:
            return self.ttl
        lifetime = max(session.ttl_seconds, 1)
        if session.expires_at is None:
            return lifetime
        remaining = math.ceil((session.expires_at - self._clock()).total_seconds())
        return min(max(remaining, 1), lifetime)

    # -- writes: durable first, then one round trip to Redis -----------------------------
    def write(
        self,
        session: Session | None,
        messages: Sequence[Message] = (),
        *,
        remember: Remember | None = None,
    ) -> None:
        if remember is None:
            self.durable.write(session, messages)
        else:  # asked only when the database behind keeps memory in its commit
            self.durable.write(session, messages, remember=remember)
        self.committed(session, messages)

    def committed(self, session: Session | None, messages: Sequence[Message]) -> None:
        """Copy what the durable store just committed into Redis; never raises."""
        if session is None and not messages:
            return
        by_session: dict[str, list[Message]] = {}
        for m in messages:
            by_session.setdefault(m.session_id, []).append(m)
        touched = set(by_session) | ({session.id} if session is not None else set())
        if not self._available():
            self._mark_stale(touched)
            return
        try:
            for sid in touched:
                this = session if session is not None and session.id == sid else None
                self._write_one(sid, this, by_session.get(sid, []))
        except Exception as exc:  # the turn is committed: a cache failure must not undo it
            self._failed("writing", exc)
            self._invalidate(touched)

    def _write_one(self, session_id: str, session: Session | None, new: list[Message]) -> None:
        mode, entries = "", []
        if new:
            # The durable store numbered the messages; without numbers, drop the list.
            numbered = all(m.id is not None for m in new)
            mode = "append" if numbered else "drop"
            entries = [_dumps(m.to_dict()) for m in new] if numbered else []
        self._write(
            keys=self._keys(session_id),
            args=[
                "" if session is None else _dumps(session.to_dict()),
                "" if session is None else self._session_ttl(session),
                self.ttl or FALLBACK_TTL,
                self.recent,
                mode,
                *entries,
            ],
        )

    def said(self, user_id: str, request_key: str) -> list[Message]:
        """From the durable store: a retried request is rare, and its answer must be exact."""
        return self.durable.said(user_id, request_key)

    # -- reads: Redis first, the durable store on a miss (and refill) --------------------
    def get_session(self, session_id: str, scope: Scope) -> Session | None:
        key = self._keys(session_id)[0]
        up = self._available()
        if up:
            try:
                raw = cast(str | None, self._redis.get(key))
            except redis.RedisError as exc:
                self._failed("reading a session", exc)
                up = False
            else:
                if raw is not None:
                    try:
                        cached = Session.from_dict(json.loads(raw))
                    except (ValueError, KeyError, TypeError) as exc:
                        log.warning("redis session cache: unreadable %s (%s)", key, exc)
                        self._invalidate([session_id])
                    else:
                        return cached if scope.admits(cached.user_id) else None
        session = self.durable.get_session(session_id, _ANY)
        if session is not None and up:
            try:  # NX: a writer that got there first has the newer copy
                self._redis.set(
                    key, _dumps(session.to_dict()), ex=self._session_ttl(session), nx=True
                )
            except redis.RedisError as exc:
                self._failed("caching a session", exc)
        return session if session is not None and scope.admits(session.user_id) else None

    def messages(
        self, session_id: str, scope: Scope, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        if limit <= 0 or before is not None or not self._available():
            return self.durable.messages(session_id, scope, limit=limit, before=before)
        keys = self._keys(session_id)
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.lrange(keys[1], 0, -1)
            pipe.get(keys[2])
            raw, seen = pipe.execute()
        except redis.RedisError as exc:
            self._failed("reading messages", exc)
            return self.durable.messages(session_id, scope, limit=limit)
        if raw:
            try:
                cached = [Message.from_dict(json.loads(e)) for e in raw if e != WHOLE]
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("redis session cache: unreadable %s (%s)", keys[1], exc)
                self._invalidate([session_id])
            else:
                return self._answer(cached, raw[0] == WHOLE, session_id, scope, limit)
        want = max(limit, self.recent)
        rows = self.durable.messages(session_id, _ANY, limit=want)
        whole = len(rows) < want
        kept = rows[-self.recent :]
        entries = ([WHOLE] if whole and len(kept) == len(rows) else []) + [
            _dumps(m.to_dict()) for m in kept
        ]
        try:
            self._fill(
                keys=[keys[1], keys[2], keys[0]],
                args=[seen or "", self.ttl or FALLBACK_TTL, *entries],
            )
        except redis.RedisError as exc:
            self._failed("caching messages", exc)
        return self._answer(rows, whole, session_id, scope, limit)

    def _answer(
        self,
        tail: list[Message],
        whole: bool,
        session_id: str,
        scope: Scope,
        limit: int,
    ) -> list[Message]:
        """The last ``limit`` of the scope's messages, if the tail we hold can tell."""
        mine = [m for m in tail if scope.admits(m.user_id)]
        if whole or len(mine) >= limit:
            return mine[-limit:]
        return self.durable.messages(session_id, scope, limit=limit)

    def close(self) -> None:
        try:
            self._redis.close()
        finally:
            self.durable.close()


_ANY = Scope.admin("session cache")
"""The cache reads the durable copy whole and answers only what the caller's scope admits."""
