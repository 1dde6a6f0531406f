"""A session's lifecycle: reopened while alive, replaced by a new one once expired.

A session expiring never touches a task: tasks are owned by the user and found by user id.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from ..model import Session

DEFAULT_TTL = timedelta(hours=24)
MAX_SESSION_TASKS = 20
"""Task ids a session remembers (the most recent); older ones are still found by user."""
TOUCH_EVERY = timedelta(seconds=60)
"""A turn rewrites its session row only if something in it changed or this long has passed
(the row write slides the expiry; sparing it keeps a turn to the rows it changes)."""


def live_or_new(
    stored: Session | None, session_id: str | None, user: str, now: datetime
) -> Session:
    """A stored session that is still alive, else a new empty one (with that id, if any)."""
    if stored is not None and not stored.expired(now):
        return stored
    ttl = stored.ttl_seconds if stored else int(DEFAULT_TTL.total_seconds())
    return Session(
        id=session_id or uuid.uuid4().hex,
        user_id=user,
        ttl_seconds=ttl,
        created_at=now,
        updated_at=now,
        version=stored.version if stored else 0,  # replaces the expired row: same lock
    )


def needs_write(session: Session, as_read: dict[str, object] | None, now: datetime) -> bool:
    """Whether a turn must write the session: new, changed, or not written for a while."""
    if as_read is None or session.to_dict() != as_read:
        return True
    return now - session.updated_at >= TOUCH_EVERY
