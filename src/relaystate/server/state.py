"""What every request handler of one app shares: the runtime, the conversation engine on
top of it, long-term memory, the rate limiter and the metrics."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..conversation import Conversation
from ..errors import RelaystateError
from ..memory.longterm import LongTermMemory
from ..runtime import Runtime
from ..scope import Scope
from .limits import RateLimiter
from .metrics import Metrics

log = logging.getLogger("relaystate.server")


@dataclass
class ServerState:
    runtime: Runtime
    conversation: Conversation
    limiter: RateLimiter
    metrics: Metrics
    memory: LongTermMemory | None = None
    _embedding: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="relaystate-embed")
    )

    def embed_later(self, scope: Scope, namespace: str) -> None:
        """Embed a namespace's new items in the background (one thread: the embedder is the
        bottleneck, and a request must not wait for it)."""
        if self.memory is not None and self.memory.embedder is not None:
            self._embedding.submit(self._embed, scope, namespace)

    def _embed(self, scope: Scope, namespace: str) -> None:
        assert self.memory is not None
        try:
            self.memory.embed_pending(scope, namespace)
        except RelaystateError as exc:  # the items stay unembedded; the next add retries
            log.warning("embedding %s failed: %s", namespace, exc)

    def close(self) -> None:
        self._embedding.shutdown(wait=True, cancel_futures=True)
