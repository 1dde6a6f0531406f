"""Stable idempotency keys: the same logical step gets the same key in every process.

Built from the task id, the action's seq and name and a canonical hash of its input, never
from Python's per-process salted ``hash()``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def input_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


def idempotency_key(task_id: str, seq: int, name: str, input: Any = None) -> str:
    """``<task>:<seq>:<name>:<digest of input>``, readable in logs and unique per step."""
    return f"{task_id}:{seq}:{name}:{input_digest(input)}"
