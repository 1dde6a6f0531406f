"""What every request handler of one app shares: the runtime, the conversation engine on
top of it, long-term memory, the rate limiter and the metrics."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .. import failpoints
from ..conversation import Conversation
from ..errors import RelaystateError
from ..memory.longterm import LongTermMemory
from ..memory.recorder import CONVERSATION, MemoryLayers
from ..runtime.runtime import Runtime
from ..scope import Scope
from .limits import RateLimiter
from .metrics import Metrics

log = logging.getLogger("relaystate.server")

_EVERY = 2**62


@dataclass
class ServerState:
    runtime: Runtime
    conversation: Conversation
    limiter: RateLimiter
    metrics: Metrics
    layers: MemoryLayers | None = None
    _embedding: ThreadPoolExecutor | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _queued: set[tuple[str, str]] = field(default_factory=set, repr=False)

    @property
    def memory(self) -> LongTermMemory | None:
        return None if self.layers is None else self.layers.longterm

    @property
    def vectors_inline(self) -> bool:
        """A turn's commit makes its vectors (a cheap embedder): no pass after it."""
        recorder = self.conversation.memory
        remember = getattr(recorder, "remember", None)
        return remember is not None and remember.vectors is not None

    def embed_later(self, scope: Scope, namespace: str, *, layers: bool = True) -> None:
        """Embed a namespace's new items (and with ``layers``, rebuild its conversation
        layers: for imports, not for every turn, as a rebuild reads the whole namespace) in
        the background (one thread: the embedder is the bottleneck, and a request must not
        wait for it). Requests for a namespace already waiting its turn are one job."""
        if self.memory is None:
            return
        key = (scope.user_id or "", namespace)
        with self._lock:  # made on first use, again after a lifespan ended (tests run several)
            if key in self._queued:
                return
            if self._embedding is None:
                self._embedding = ThreadPoolExecutor(1, thread_name_prefix="relaystate-embed")
            self._queued.add(key)
            self._embedding.submit(self._embed, scope, namespace, key, layers)

    def catch_up(self, namespace: str = CONVERSATION) -> int:
        """Queue the vectors every user's items still lack (what a process killed between
        a turn's commit and its vector pass left): at start-up, after recovery. How many
        users were queued."""
        memory = self.memory
        if memory is None or memory.embedder is None:
            return 0
        owners = memory.memories.unembedded_owners(namespace, memory.embedder.name, limit=_EVERY)
        for user in owners:
            self.embed_later(Scope.user(user), namespace, layers=False)
        return len(owners)

    def _embed(self, scope: Scope, namespace: str, key: tuple[str, str], layers: bool) -> None:
        assert self.memory is not None
        with self._lock:
            self._queued.discard(key)
        failpoints.hit("before_vectors", namespace)
        try:
            self.memory.embed_pending(scope, namespace)
            if layers:
                self.memory.build_layers(scope, namespace)
        except RelaystateError as exc:  # the items stay as they are; the next add retries
            log.warning("embedding %s failed: %s", namespace, exc)

    def close(self) -> None:
        """Stop embedding (what was not embedded yet is, after the next add or turn)."""
        with self._lock:
            executor, self._embedding = self._embedding, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
