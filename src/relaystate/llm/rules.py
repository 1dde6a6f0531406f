"""The offline default model: it declines to understand or phrase anything.

With no language model configured, routing and slot extraction are done by the deterministic
rules of ``relaystate.conversation`` and replies come straight from the templates. This model
makes that explicit instead of pretending: it never guesses a route or a slot value, keeps no
summary of its own and returns every reply exactly as the templates wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from .base import RouteCandidate, RouteChoice, SlotSpec


class RuleModel:
    """The ``Model`` used when none is configured: deterministic, offline, always declines."""

    def route(
        self, text: str, candidates: Sequence[RouteCandidate], *, language: str
    ) -> RouteChoice | None:
        """None: the routing rules already had their say, and guessing would be worse."""
        return None

    def extract(
        self, text: str, slots: Sequence[SlotSpec], *, language: str, today: date
    ) -> dict[str, Any] | None:
        """None: slot values come from the rule-based extractors, not from here."""
        return None

    def summarize(self, texts: Sequence[str], *, language: str, max_words: int) -> str | None:
        """None: the caller keeps its own deterministic summary."""
        return None

    def rephrase(self, reply: str, *, language: str) -> str:
        """The template reply, unchanged: it already says exactly what was decided."""
        return reply

    def __repr__(self) -> str:
        return "RuleModel()"
