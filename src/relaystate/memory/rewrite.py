"""Query rewriting: a question split into the searches that answer it.

A multi-hop question ("What do Caroline and Melanie both like to do?") names what several
turns hold; a search per part, fused by reciprocal rank, can find turns that one search
over the whole question ranks low. A :class:`QueryRewriter` gives those searches, the
question itself first; :class:`NoRewrite` (the default) gives the question alone, and
search is then what it is without a model.

- :class:`ChatQueryRewriter`: any OpenAI-compatible ``POST {base_url}/chat/completions``
  (through :class:`relaystate.llm.openai.OpenAICompatibleModel`, checked as every chat
  answer is), asked for ``{"queries": [...]}``: at most ``MAX_QUERIES`` non-empty texts. An
  answer that breaks any of that, a timeout or an error status logs one warning and gives
  the question alone.

:func:`rewriter_from_config` builds one from a short spec or ``RELAYSTATE_REWRITER``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..specs import read_spec

if TYPE_CHECKING:
    from ..llm.openai import OpenAICompatibleModel

log = logging.getLogger(__name__)

ENV_REWRITER = "RELAYSTATE_REWRITER"
"""The rewriter :func:`rewriter_from_config` builds when given no spec (unset: none)."""
ENV_REWRITER_API_KEY = "RELAYSTATE_REWRITER_API_KEY"
"""The API key of an ``openai:`` rewriter; never the chat model's, which may be another host's."""
MAX_QUERIES = 4
"""Sub-queries a model may give; an answer with more is no answer."""
MAX_QUERY_CHARS = 500

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string"},
            "description": f"1 to {MAX_QUERIES} short search queries",
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}
SYSTEM = (
    "You turn a question about past conversations into search queries for a memory searched "
    f"by keywords and by meaning. Give 1 to {MAX_QUERIES} short queries: one per thing the "
    "question needs to find (a question about two people or two events needs one for each), "
    "each self-contained, with the names the question uses; a simple question is one query. "
    'Answer as JSON: {"queries": ["...", ...]}.'
)


@runtime_checkable
class QueryRewriter(Protocol):
    def rewrite(self, question: str) -> list[str]:
        """The searches that answer ``question``, the question itself first; never raises
        for a model's failure (it gives ``[question]``)."""
        ...


class NoRewrite:
    """The question as it is: one search."""

    def __repr__(self) -> str:
        return "NoRewrite()"

    def rewrite(self, question: str) -> list[str]:
        return [question]


class ChatQueryRewriter:
    """Sub-queries from a chat model behind an OpenAI-compatible endpoint (temperature 0,
    ``{"queries": [...]}`` as a strict JSON schema). ``timeout`` bounds each attempt,
    ``retries`` the extra attempts after a transient failure: a search waits for both."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 5.0,
        retries: int = 1,
        backoff: float = 0.25,
    ) -> None:
        from ..llm.openai import OpenAICompatibleModel

        self._model: OpenAICompatibleModel = OpenAICompatibleModel(
            base_url, api_key, model, timeout=timeout, retries=retries, backoff=backoff
        )
        self.base_url = self._model.base_url
        self.model = self._model.model

    def __repr__(self) -> str:
        return f"ChatQueryRewriter(base_url={self.base_url!r}, model={self.model!r})"

    def rewrite(self, question: str) -> list[str]:
        from ..llm.endpoint import EndpointError

        try:
            answer = self._model.ask_json("rewrite", SYSTEM, question, "search_queries", SCHEMA)
            queries = _checked(answer["queries"])
        except EndpointError as exc:
            log.warning(
                "query rewrite (%s at %s) gave no usable answer; searching the question as "
                "it is: %s",
                self.model,
                self.base_url,
                self._model.redact(exc.reason),
            )
            return [question]
        except Exception:
            log.warning("query rewrite failed unexpectedly; searching the question as it is")
            return [question]
        return distinct([question, *queries])


def _checked(queries: Any) -> list[str]:
    from ..llm.endpoint import EndpointError

    if not isinstance(queries, list) or not 1 <= len(queries) <= MAX_QUERIES:
        size = len(queries) if isinstance(queries, list) else "no"
        raise EndpointError(f"{size} queries, expected 1 to {MAX_QUERIES}")
    for n, query in enumerate(queries):
        if not isinstance(query, str) or not query.strip():
            raise EndpointError(f"query {n} is not a non-empty text")
        if len(query) > MAX_QUERY_CHARS or "\0" in query:
            raise EndpointError(f"query {n} is longer than {MAX_QUERY_CHARS} or holds a NUL")
    return [" ".join(q.split()) for q in queries]


def distinct(queries: list[str]) -> list[str]:
    """The queries in order, each once (compared without case and extra spaces)."""
    seen: set[str] = set()
    out = []
    for query in queries:
        key = " ".join(query.casefold().split())
        if key and key not in seen:
            seen.add(key)
            out.append(query)
    return out


def rewriter_from_config(
    spec: str | None = None, *, environ: Mapping[str, str] | None = None
) -> QueryRewriter | None:
    """The rewriter a short spec names; without one, ``RELAYSTATE_REWRITER``; else none.

    - ``none`` (or empty): None, each question is searched as it is
    - ``openai:MODEL@BASE_URL``: :class:`ChatQueryRewriter`, e.g.
      ``openai:gpt-4o-mini@https://api.openai.com/v1``; its key comes from
      ``RELAYSTATE_REWRITER_API_KEY``

    A spec it cannot read raises :class:`ConfigError` naming the setting.
    """
    env = os.environ if environ is None else environ
    found = read_spec(spec, env, ENV_REWRITER, kind="rewriter")
    if found is None:
        return None
    if found.family == "openai":
        model, base_url = found.model_at()
        try:
            return ChatQueryRewriter(
                base_url, model, env.get(ENV_REWRITER_API_KEY, "").strip() or None
            )
        except ValueError as exc:
            raise ConfigError(f"{found.setting}: {exc}") from None
    raise ConfigError(
        f"{found.setting}: {found.text!r} is no rewriter; use none or openai:MODEL@BASE_URL"
    )


__all__ = [
    "ENV_REWRITER",
    "ENV_REWRITER_API_KEY",
    "MAX_QUERIES",
    "ChatQueryRewriter",
    "NoRewrite",
    "QueryRewriter",
    "distinct",
    "rewriter_from_config",
]
