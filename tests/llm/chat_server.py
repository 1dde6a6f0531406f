"""A local server speaking the OpenAI chat-completions wire protocol with scripted replies:
how the model client is tested here, where no hosted model can run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..wire import Received, Reply, StubServer
from ..wire import running as serving

ChatServer = StubServer
__all__ = ["ChatServer", "Received", "Reply", "completion", "running"]


def unscripted(_: dict[str, Any]) -> Reply:
    """A request the test did not expect: an answer no client takes for a real one."""
    return Reply({"error": "unscripted"}, 599)


@contextmanager
def running() -> Iterator[ChatServer]:
    """A chat server on a free port until the block ends."""
    with serving(unscripted) as chat:
        yield chat


def completion(
    content: str | None, *, refusal: str | None = None, finish: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_800_000_000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
        ],
    }
