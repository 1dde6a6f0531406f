"""What every request handler of one app shares: the runtime, the conversation engine on
top of it, long-term memory (and the models it may use), the rate limiter and the metrics."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import failpoints
from ..conversation import Conversation
from ..errors import RelaystateError
from ..memory.longterm import LongTermMemory, owner
from ..memory.recorder import CONVERSATION, MemoryLayers
from ..runtime.runtime import Runtime
from ..scope import Scope
from .limits import RateLimiter
from .metrics import Metrics

if TYPE_CHECKING:
    from ..memory.extract import FactExtractor
    from ..model import MemoryItem

log = logging.getLogger("relaystate.server")

_EVERY = 2**62


@dataclass
class ServerState:
    runtime: Runtime
    conversation: Conversation
    limiter: RateLimiter
    metrics: Metrics
    layers: MemoryLayers | None = None
    extractor: FactExtractor | None = None
    """Extracts the facts of added items into the memory graph, in the background job."""
    _embedding: ThreadPoolExecutor | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _queued: set[tuple[str, str]] = field(default_factory=set, repr=False)
    _to_extract: dict[tuple[str, str], dict[str, MemoryItem]] = field(
        default_factory=dict, repr=False
    )
    _closing: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def memory(self) -> LongTermMemory | None:
        return None if self.layers is None else self.layers.longterm

    @property
    def vectors_inline(self) -> bool:
        """A turn's commit makes its vectors (a cheap embedder): no pass after it."""
        recorder = self.conversation.memory
        remember = getattr(recorder, "remember", None)
        return remember is not None and remember.vectors is not None

    def embed_later(
        self,
        scope: Scope,
        namespace: str,
        *,
        layers: bool = True,
        extract: Sequence[MemoryItem] = (),
    ) -> None:
        """Embed a namespace's new items (and with ``layers``, rebuild its conversation
        layers: for imports, not for every turn, as a rebuild reads the whole namespace) in
        the background (one thread: the embedder is the bottleneck, and a request must not
        wait for it). With an :attr:`extractor`, the job then extracts the facts of the
        items ``extract`` lists (those of the request, not the whole namespace) into the
        memory graph and keeps them for search. Requests for a namespace already waiting
        its turn are one job (their items to extract too)."""
        if self.memory is None:
            return
        key = (scope.user_id or "", namespace)
        with self._lock:  # made on first use, again after a lifespan ended (tests run several)
            if extract and self.extractor is not None:
                waiting = self._to_extract.setdefault(key, {})
                waiting.update((item.id, item) for item in extract)  # the latest of an id
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
            items = list(self._to_extract.pop(key, {}).values())
        failpoints.hit("before_vectors", namespace)
        try:
            self.memory.embed_pending(scope, namespace)
            if layers:
                self.memory.build_layers(scope, namespace)
        except RelaystateError as exc:  # the items stay as they are; the next add retries
            log.warning("embedding %s failed: %s", namespace, exc)
        finally:  # the facts do not depend on the vectors
            if items:
                self._extract(scope, namespace, items)

    def _extract(self, scope: Scope, namespace: str, items: Sequence[MemoryItem]) -> None:
        """The facts of ``items`` into the graph and beside the namespace for search, a
        batch at a time (a closing server stops between two). A model that fails costs its
        batch the facts (one warning, from
        :func:`~relaystate.memory.extract.extract_into_graph`); anything else that fails
        here costs the facts too, with one warning: the items are stored already."""
        from ..memory.extract import BATCH, extract_into_graph, fact_items

        graph = None if self.layers is None else self.layers.graph
        if self.extractor is None or graph is None or self.memory is None:
            return
        for start in range(0, len(items), BATCH):
            if self._closing.is_set():
                return
            part = items[start : start + BATCH]
            try:
                report = extract_into_graph(graph, owner(scope), part, self.extractor)
                self.memory.keep_facts(scope, namespace, fact_items(report, namespace))
            except Exception as exc:  # a background job: nobody to answer but the log
                log.warning(
                    "extracting the facts of %d items of %s failed, the items are kept: %s",
                    len(part),
                    namespace,
                    exc if isinstance(exc, RelaystateError) else repr(exc),
                )

    def settled(self, timeout: float | None = None) -> None:
        """Wait until the background jobs queued so far have run (TimeoutError after
        ``timeout`` seconds): what an add queued is then done."""
        with self._lock:
            executor = self._embedding
        if executor is None:
            return
        try:
            done = executor.submit(lambda: None)  # one thread: the jobs run in order
        except RuntimeError:  # closed meanwhile: closing waited for them
            return
        done.result(timeout)

    def close(self) -> None:
        """Stop embedding (what was not embedded yet is, after the next add or turn; the
        facts of items not extracted yet are not)."""
        self._closing.set()  # an extraction running stops after its batch
        with self._lock:
            executor, self._embedding = self._embedding, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:  # the jobs cancelled: a later add queues its namespace again
            self._queued.clear()
            self._to_extract.clear()
        self._closing.clear()
