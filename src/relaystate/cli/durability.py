"""The start-up warning of a long-running command (``serve``, ``workers``) whose database
settings could lose turns it acknowledges: said once, on stderr, before serving."""

from __future__ import annotations

import sys
from typing import Any

from ..scope import Scope


def warn(rt: Any) -> list[str]:
    """Print each durability warning of ``rt``'s store; returns them."""
    found: list[str] = rt.durability_warnings(Scope.admin("start-up"))
    for sentence in found:
        print(f"relaystate: warning: {sentence}", file=sys.stderr, flush=True)
    return found
