"""API keys: a random secret shown once, stored only as a hash, found by its public id.

A key reads ``rsk_<id>_<secret>``: the id finds the stored record in one lookup, the secret
(32 random bytes) is compared by its SHA-256 in constant time. A slow password hash would buy
nothing here: the secret is random, not chosen by a person, so it cannot be guessed from a
leaked hash.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import TYPE_CHECKING

from ..model import ApiKey
from ..scope import Scope

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

PREFIX = "rsk"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue(
    runtime: Runtime, scope: Scope, user_id: str, *, name: str, admin: bool, now: datetime
) -> tuple[ApiKey, str]:
    """A new key for ``user_id`` (an operator's act: admin ``scope``): the stored record,
    and the key to hand over (only now)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    record = ApiKey(key_id, user_id, name, admin, _digest(secret), now)
    runtime.add_api_key(scope, record)
    return record, f"{PREFIX}_{key_id}_{secret}"


def verify(runtime: Runtime, presented: str) -> ApiKey | None:
    """The active key ``presented`` is, or None (unknown, wrong secret, revoked, malformed)."""
    prefix, _, rest = presented.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id or not secret or len(presented) > 200:
        return None
    if not key_id.isalnum():
        return None
    found = runtime.api_key(key_id)
    if found is None or not found.active:
        return None
    return found if hmac.compare_digest(found.key_hash, _digest(secret)) else None
