"""What every request handler of one app shares: the runtime, the conversation engine on
top of it, the rate limiter and the metrics."""

from __future__ import annotations

from dataclasses import dataclass

from ..conversation import Conversation
from ..runtime import Runtime
from .limits import RateLimiter
from .metrics import Metrics


@dataclass
class ServerState:
    runtime: Runtime
    conversation: Conversation
    limiter: RateLimiter
    metrics: Metrics
