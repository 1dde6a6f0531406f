"""Rerankers: a second opinion on the best candidates of a long-term memory search.

A :class:`Reranker` scores each candidate text against the query (higher is better); search
(:meth:`relaystate.memory.longterm.LongTermMemory.search`) asks it about its top
``RERANK_DEPTH`` hits and orders them again. None is needed: without one, search is what its
rules rank. A reranker that fails raises :class:`RerankError`, and search answers in its rule
order all the same.

- :class:`HTTPReranker`: any ``POST {base_url}/rerank`` server, in one of two wire
  protocols: ``tei`` (Hugging Face text-embeddings-inference: ``{"query", "texts"}`` in,
  ``[{"index", "score"}]`` out) or ``cohere`` (Cohere, Jina, vLLM, ...: ``{"model",
  "query", "documents", "top_n"}`` in, ``{"results": [{"index", "relevance_score"}]}`` out).
  Either answer shape is read from either; every answer is checked.
- :class:`WindowReranker`: no service: the cosine of an embedder's query and candidate
  vectors. For a conversation, search gives it each turn's window (the turn with its
  neighbours), which an embedder sees whole where the rules saw words.

:func:`reranker_from_config` builds one from a short spec or ``RELAYSTATE_RERANKER``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigError, RelaystateError
from ..specs import read_spec
from .embed import Embedder, EmbeddingError, cosine

log = logging.getLogger(__name__)

Flavour = Literal["tei", "cohere"]
FLAVOURS: tuple[Flavour, ...] = ("tei", "cohere")
ENV_RERANKER = "RELAYSTATE_RERANKER"
"""The reranker :func:`reranker_from_config` builds when given no spec (unset: none)."""
ENV_RERANKER_API_KEY = "RELAYSTATE_RERANKER_API_KEY"
"""The API key of an HTTP reranker (sent as ``Authorization: Bearer``)."""
MAX_RESPONSE_BYTES = 4 << 20
"""Scores of a few dozen texts are a few kilobytes; more than this is no answer."""
BATCH = 32
"""Texts one request carries: text-embeddings-inference refuses more by default
(``--max-client-batch-size 32``)."""


class RerankError(RelaystateError):
    """No scores: the reranker could not be asked or its answer was unusable. ``retryable``
    says whether the same call may succeed later; ``status`` is the HTTP status, if any."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = 0.0


@runtime_checkable
class Reranker(Protocol):
    """A query and candidate texts in, one relevance score per text out (higher: better)."""

    @property
    def name(self) -> str: ...

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One finite score per text, in order; raises :class:`RerankError` when it cannot."""
        ...


class HTTPReranker:
    """A reranking model behind ``POST {base_url}/rerank``.

    ``flavour`` picks the request: ``tei`` sends ``{"query", "texts", "truncate": true,
    "raw_scores": false}`` (``base_url`` is the server's root, e.g. ``http://localhost:8080``);
    ``cohere`` sends ``{"model", "query", "documents", "top_n"}`` (``base_url`` ends in the API
    version, ``https://api.cohere.com/v2``, ``https://api.jina.ai/v1``) and needs ``model``.
    The answer may be either shape (a list of ``{"index", "score"}``, or ``{"results":
    [{"index", "relevance_score"}]}``); it must score every text once, with an index in range
    and a finite number, or the call raises :class:`RerankError` saying what was wrong.

    Texts go ``BATCH`` to a request. ``timeout`` bounds each attempt from connect to last
    byte; timeouts, dropped connections, 408, 429 and 5xx are retried ``retries`` times
    (a search waits for it: keep both small). The API key goes in the ``Authorization``
    header only, never in errors or logs.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        *,
        flavour: Flavour = "tei",
        timeout: float = 5.0,
        retries: int = 1,
        backoff: float = 0.25,
    ) -> None:
        from ..llm.endpoint import Endpoint  # no HTTP client for a process that never reranks

        if flavour not in FLAVOURS:
            raise ValueError(f"reranker flavour must be tei or cohere, not {flavour!r}")
        self._endpoint = Endpoint.parse(
            base_url,
            "/rerank",
            what="reranker",
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        self.model = (model or "").strip() or None
        if flavour == "cohere" and self.model is None:
            raise ValueError("a cohere-style reranker needs a model name")
        self.flavour: Flavour = flavour
        self.base_url = self._endpoint.base_url
        self.timeout = self._endpoint.timeout
        self.retries = self._endpoint.retries

    def __repr__(self) -> str:
        return (
            f"HTTPReranker(base_url={self.base_url!r}, model={self.model!r}, "
            f"flavour={self.flavour!r})"
        )

    @property
    def name(self) -> str:
        return f"{self.flavour}:{self.model or ''}@{self.base_url}"

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if isinstance(texts, str):
            raise RerankError("texts must be a sequence of texts, not one string")
        scores: list[float] = []
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            payload: dict[str, Any]
            if self.flavour == "tei":
                payload = {"query": query, "texts": batch, "truncate": True, "raw_scores": False}
            else:
                payload = {
                    "model": self.model,
                    "query": query,
                    "documents": batch,
                    "top_n": len(batch),
                }
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            scores.extend(self._scores(self._ask(body), len(batch)))
        return scores

    def _ask(self, body: bytes) -> Any:
        from ..llm.endpoint import EndpointError, with_retries

        def once() -> Any:
            try:
                return self._endpoint.post_json(body, max_bytes=MAX_RESPONSE_BYTES)
            except EndpointError as exc:
                failed = RerankError(
                    self._where(exc.reason), retryable=exc.retryable, status=exc.status
                )
                failed.retry_after = min(exc.retry_after, self.timeout)  # a search is waiting
                raise failed from None

        def note(exc: RerankError, attempt: int, delay: float) -> None:
            log.info("rerank: %s; retry %d of %d in %.2fs", exc, attempt, self.retries, delay)

        return with_retries(
            once, retries=self.retries, backoff=self.backoff, failure=RerankError, note=note
        )

    @property
    def backoff(self) -> float:
        return self._endpoint.backoff

    def _where(self, reason: str) -> str:
        return self._endpoint.redact(f"rerank at {self.base_url}: {reason}")

    def _scores(self, body: Any, count: int) -> list[float]:
        """The scores of one answer in text order, after checking every one of them."""
        if isinstance(body, dict) and "results" in body:
            rows, key = body["results"], "relevance_score"
        else:
            rows, key = body, "score"
        if not isinstance(rows, list):
            raise RerankError(self._where("the answer is neither a list nor {'results': [...]}"))
        scores: list[float | None] = [None] * count
        for row in rows:
            if not isinstance(row, dict):
                raise RerankError(self._where(f"a result is not an object: {_short(row)}"))
            index = row.get("index")
            if type(index) is not int:
                raise RerankError(self._where(f"a result has no whole-number index: {index!r}"))
            if not 0 <= index < count:
                raise RerankError(self._where(f"index {index} is out of range for {count} texts"))
            if scores[index] is not None:
                raise RerankError(self._where(f"index {index} is scored twice"))
            value = row.get(key, row.get("score" if key != "score" else "relevance_score"))
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise RerankError(self._where(f"text {index} has no finite score: {value!r}"))
            scores[index] = float(value)
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            listed = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            raise RerankError(self._where(f"{len(missing)} of {count} texts unscored ({listed})"))
        return [s for s in scores if s is not None]


class WindowReranker:
    """Scores each text by ``embedder``'s cosine to the query: a reranker with no service.

    It knows nothing of windows itself: search hands it, for each turn of a conversation,
    the turn's window (the turn with its neighbours), and for other items their text. Put
    a :class:`~relaystate.memory.embed.CachedEmbedder` in front of a model, since the same
    windows come back query after query. An embedder's failure is a :class:`RerankError`.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def __repr__(self) -> str:
        return f"WindowReranker({self.embedder!r})"

    @property
    def name(self) -> str:
        return f"windows:{self.embedder.name}"

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        if isinstance(texts, str):
            raise RerankError("texts must be a sequence of texts, not one string")
        if not texts:
            return []
        try:
            (q,) = self.embedder.embed([query], kind="query")
            vectors = self.embedder.embed(list(texts), kind="document")
            if len(vectors) != len(texts):
                raise RerankError(f"{self.embedder.name}: {len(vectors)} vectors for {len(texts)}")
            return [cosine(q, v) for v in vectors]
        except (EmbeddingError, ValueError) as exc:
            raise RerankError(f"rerank with {self.embedder.name}: {exc}") from None


def reranker_from_config(
    spec: str | None = None, *, environ: Mapping[str, str] | None = None
) -> Reranker | None:
    """The reranker a short spec names; without one, ``RELAYSTATE_RERANKER``; else none.

    - ``none`` (or empty): None, search keeps its rule order
    - ``tei:BASE_URL``: :class:`HTTPReranker` of a text-embeddings-inference server, e.g.
      ``tei:http://localhost:8080``
    - ``cohere:MODEL@BASE_URL``, ``jina:MODEL@BASE_URL``: the Cohere wire protocol, e.g.
      ``cohere:rerank-v3.5@https://api.cohere.com/v2``,
      ``jina:jina-reranker-v2-base-multilingual@https://api.jina.ai/v1``
    - ``e5-windows``: :class:`WindowReranker` over the local e5 model (``relaystate[embed]``)

    An HTTP reranker's key comes from ``RELAYSTATE_RERANKER_API_KEY``. A spec it cannot read
    raises :class:`ConfigError` naming the setting.
    """
    env = os.environ if environ is None else environ
    found = read_spec(spec, env, ENV_RERANKER, kind="reranker")
    if found is None:
        return None
    family, rest = found.family, found.rest
    key = env.get(ENV_RERANKER_API_KEY, "").strip() or None
    try:
        if family == "e5-windows" and not rest:
            from .embed import CachedEmbedder, LocalE5Embedder

            return WindowReranker(CachedEmbedder(LocalE5Embedder()))
        if family == "tei" and rest.strip():
            return HTTPReranker(rest, None, key, flavour="tei")
        if family in ("cohere", "jina"):
            model, base_url = found.model_at()
            return HTTPReranker(base_url, model, key, flavour="cohere")
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{found.setting}: {exc}") from None
    raise ConfigError(
        f"{found.setting}: {found.text!r} is no reranker; use none, tei:BASE_URL, "
        "cohere:MODEL@BASE_URL, jina:MODEL@BASE_URL or e5-windows"
    )


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = [
    "ENV_RERANKER",
    "ENV_RERANKER_API_KEY",
    "FLAVOURS",
    "Flavour",
    "HTTPReranker",
    "RerankError",
    "Reranker",
    "WindowReranker",
    "reranker_from_config",
]
