"""A retried request answered from the turn it committed, never decided again.

A client that timed out does not know whether its turn landed; it sends the same request
with the same key (HTTP ``Idempotency-Key``). The user's words were stored with that key in
the transaction that committed the turn, so the retry finds them and answers with what
that turn replied and the Task as it is now: no second edit, no second Action. A key names
one request: the same key with other words, or in another session, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RequestKeyReused
from ..model import Message, TaskState
from ..runtime.runtime import Runtime
from ..scope import Scope
from . import replies
from .intents import detect_language


@dataclass(frozen=True)
class Replay:
    """What a committed turn said, read back for its request key."""

    session_id: str
    reply: str
    language: str
    state: TaskState | None
    messages: list[Message]


def replayed(
    runtime: Runtime, scope: Scope, key: str, text: str, session_id: str | None
) -> Replay | None:
    """The turn ``key`` committed for the scope's user, or None if none did yet."""
    said = runtime.said(scope, key)
    if not said:
        return None
    words, answers = said[0], said[1:]
    if words.text != text:
        raise RequestKeyReused(key, "other words")
    if session_id is not None and words.session_id != session_id:
        raise RequestKeyReused(key, f"a turn in session {words.session_id}")
    state = runtime.task(scope, words.task_id) if words.task_id else None
    language = detect_language(text, default="en")
    reply = "\n".join(m.text for m in answers)
    if not reply and state is not None:
        # committed, but stopped before its reply (it rides on the last commit of a turn
        # whose Actions ran): say where the Task stands now
        step = runtime.next_step(state)
        reply = replies.reply_for(runtime.template_of(state), state, step, language)
    return Replay(words.session_id, reply, language, state, said)
