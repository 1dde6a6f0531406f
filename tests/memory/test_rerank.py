"""Rerankers: the /rerank wire protocol (text-embeddings-inference and Cohere/Jina) against a
local server speaking it, every malformed answer refused, the window reranker, the config
spec, and long-term memory search reordered by a reranker, or, whatever goes wrong with it,
answered in its rule order."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope, open_store
from relaystate.errors import ConfigError
from relaystate.memory import embed, longterm
from relaystate.memory.embed import EmbeddingError, HashEmbedder, Kind, Vector, cosine
from relaystate.memory.longterm import Hit, LongTermMemory
from relaystate.memory.rerank import (
    BATCH,
    HTTPReranker,
    Reranker,
    RerankError,
    WindowReranker,
    reranker_from_config,
)
from relaystate.model import MemoryItem
from relaystate.store import Stores

from ..wire import Reply, StubServer, running

KEY = "sk-rerank-secret-4711"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
ALICE = Scope.user("alice")
NOTES = [
    MemoryItem("n1", "alice", "notes", "trip: a window seat on the flight to Tokyo", T0),
    MemoryItem("n2", "alice", "notes", "trip: the hotel in Kyoto has a garden", T0),
    MemoryItem("n3", "alice", "notes", "trip: her passport expires in June", T0),
    MemoryItem("n4", "alice", "notes", "trip: vegetarian meals on the long flight", T0),
]
TURNS = [
    ("D1:1", "1", "Caroline", "I went to a support group yesterday"),
    ("D1:2", "1", "Melanie", "That sounds brave. How did it feel?"),
    ("D1:3", "1", "Caroline", "It felt like home, everyone was kind"),
    ("D2:1", "2", "Melanie", "I painted a sunrise over the lake"),
    ("D2:2", "2", "Caroline", "Your sunrise painting is lovely"),
]


def tei_answer(scores: Sequence[float]) -> list[dict[str, Any]]:
    """As TEI answers: sorted by score, best first (the index says which text)."""
    rows = [{"index": i, "score": s} for i, s in enumerate(scores)]
    return sorted(rows, key=lambda r: -r["score"])


def cohere_answer(scores: Sequence[float]) -> dict[str, Any]:
    rows = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
    return {"id": "x", "results": sorted(rows, key=lambda r: -r["relevance_score"])}


def raw(value: Any) -> bytes:
    """A JSON body of any shape (a reply's body is an object or bytes)."""
    return json.dumps(value).encode()


def texts_of(body: dict[str, Any]) -> list[str]:
    return list(body.get("texts") or body.get("documents") or [])


class Scorer:
    """The server's default answer: a score per text from ``prefer`` (texts containing its
    words score higher, earlier words highest), in the shape of the request's flavour."""

    def __init__(self) -> None:
        self.prefer: list[str] = []

    def score(self, text: str) -> float:
        for n, word in enumerate(self.prefer):
            if word in text:
                return 1.0 - n / 100
        return 0.0

    def __call__(self, body: dict[str, Any]) -> Reply:
        scores = [self.score(t) for t in texts_of(body)]
        return Reply(raw(tei_answer(scores) if "texts" in body else cohere_answer(scores)))


@pytest.fixture
def scorer() -> Scorer:
    return Scorer()


@pytest.fixture
def tei(scorer: Scorer) -> Iterator[StubServer]:
    with running(scorer, path="") as server:
        yield server


@pytest.fixture
def cohere(scorer: Scorer) -> Iterator[StubServer]:
    with running(scorer, path="/v2") as server:
        yield server


@pytest.fixture(autouse=True)
def _key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_store(f"sqlite:///{tmp_path}/memory.db")
    yield opened
    opened.close()


@pytest.fixture
def notes(stores: Stores) -> LongTermMemory:
    mem = LongTermMemory(stores.memories, clock=lambda: T0, embedder=HashEmbedder(256))
    mem.add(ALICE, "notes", NOTES)
    mem.embed_pending(ALICE, "notes")
    return mem


def ids(hits: Sequence[Hit]) -> list[str]:
    return [h.item.id for h in hits]


def client(server: StubServer, flavour: str = "tei", **options: Any) -> HTTPReranker:
    options.setdefault("timeout", 2.0)
    options.setdefault("retries", 0)
    options.setdefault("backoff", 0.01)
    model = "rerank-test" if flavour == "cohere" else None
    return HTTPReranker(server.url, model, KEY, flavour=flavour, **options)  # type: ignore[arg-type]


# -- the wire ------------------------------------------------------------------------------------


def test_tei_sends_query_and_texts_and_reads_scores_by_index(
    tei: StubServer, scorer: Scorer
) -> None:
    scorer.prefer = ["ccc", "a"]
    reranker = client(tei)
    assert isinstance(reranker, Reranker)
    assert reranker.rerank("which?", ["a", "bb", "ccc"]) == [pytest.approx(0.99), 0.0, 1.0]
    sent = tei.last
    assert sent.path == "/rerank"
    assert sent.body == {
        "query": "which?",
        "texts": ["a", "bb", "ccc"],
        "truncate": True,
        "raw_scores": False,
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert reranker.name == f"tei:@{tei.url}"


def test_cohere_sends_model_documents_and_top_n(cohere: StubServer, scorer: Scorer) -> None:
    scorer.prefer = ["bb"]
    reranker = client(cohere, "cohere")
    assert reranker.rerank("which?", ["a", "bb"]) == [0.0, 1.0]
    assert cohere.last.path == "/v2/rerank"
    assert cohere.last.body == {
        "model": "rerank-test",
        "query": "which?",
        "documents": ["a", "bb"],
        "top_n": 2,
    }
    assert reranker.name == f"cohere:rerank-test@{cohere.url}"


@pytest.mark.parametrize("flavour", ["tei", "cohere"])
@pytest.mark.parametrize("shape", [tei_answer, cohere_answer], ids=["tei-shape", "cohere-shape"])
def test_either_flavour_reads_either_answer_shape(
    tei: StubServer, flavour: str, shape: Callable[[Sequence[float]], Any]
) -> None:
    tei.script(Reply(raw(shape([0.25, 0.75, -1.5]))))
    assert client(tei, flavour).rerank("q", ["x", "y", "z"]) == [0.25, 0.75, -1.5]


def test_texts_go_in_batches_the_server_accepts(tei: StubServer, scorer: Scorer) -> None:
    scorer.prefer = ["t39", "t0"]
    texts = [f"t{i}" for i in range(BATCH + 8)]
    scores = client(tei).rerank("q", texts)
    assert [len(r.body["texts"]) for r in tei.received] == [BATCH, 8]
    assert scores[0] == pytest.approx(0.99) and scores[39] == 1.0 and scores[5] == 0.0


def test_no_texts_ask_nothing(tei: StubServer) -> None:
    assert client(tei).rerank("q", []) == []
    assert tei.received == []
    with pytest.raises(RerankError, match="one string"):
        client(tei).rerank("q", "not a list")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"results": "nope"}, "neither a list"),
        ({"scores": [1, 2]}, "neither a list"),
        ("a string", "neither a list"),
        ([1, 2], "not an object"),
        ([{"index": 0, "score": 1}, {"index": 0, "score": 2}], "scored twice"),
        ([{"index": 0, "score": 1}, {"index": 2, "score": 2}], "out of range"),
        ([{"index": -1, "score": 1}, {"index": 1, "score": 2}], "out of range"),
        ([{"index": True, "score": 1}, {"index": 1, "score": 2}], "whole-number index"),
        ([{"index": "0", "score": 1}, {"index": 1, "score": 2}], "whole-number index"),
        ([{"index": 0.0, "score": 1}, {"index": 1, "score": 2}], "whole-number index"),
        ([{"score": 1}, {"index": 1, "score": 2}], "whole-number index"),
        ([{"index": 1, "score": 2}], "1 of 2 texts unscored"),
        ([], "2 of 2 texts unscored"),
        ({"results": [{"index": 0, "relevance_score": 1}]}, "1 of 2 texts unscored"),
        ([{"index": 0}, {"index": 1, "score": 2}], "no finite score"),
        ([{"index": 0, "score": "high"}, {"index": 1, "score": 2}], "no finite score"),
        ([{"index": 0, "score": None}, {"index": 1, "score": 2}], "no finite score"),
        ([{"index": 0, "score": True}, {"index": 1, "score": 2}], "no finite score"),
        (b'[{"index": 0, "score": NaN}, {"index": 1, "score": 2}]', "not valid JSON"),
        (b'[{"index": 0, "score": 1e999}, {"index": 1, "score": 2}]', "no finite score"),
        (b"<html>bad gateway</html>", "not valid JSON"),
        (b'[{"index": 0, "score": 1}, {"index": 0, "index": 1, "score": 2}]', "duplicate key"),
        (b"\xff\xfe", "not UTF-8"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_malformed_answer_is_a_rerank_error_saying_what(
    tei: StubServer, body: Any, says: str
) -> None:
    tei.script(Reply(body if isinstance(body, bytes | dict) else raw(body)))
    with pytest.raises(RerankError, match=says) as caught:
        client(tei).rerank("q", ["x", "y"])
    assert str(caught.value).startswith(f"rerank at {tei.url}: ")
    assert not caught.value.retryable
    assert len(tei.received) == 1  # an answer that was given is not asked for again


@pytest.mark.parametrize("status", [500, 503])
def test_5xx_is_retried_then_a_retryable_rerank_error(tei: StubServer, status: int) -> None:
    tei.script(*[Reply({"error": "overloaded"}, status) for _ in range(3)])
    with pytest.raises(RerankError, match=f"HTTP {status}: overloaded") as caught:
        client(tei, retries=2).rerank("q", ["x"])
    assert caught.value.retryable and caught.value.status == status
    assert len(tei.received) == 3

    tei.script(Reply({"error": "busy"}, status))  # then well: the retry answers
    assert client(tei, retries=1).rerank("q", ["x"]) == [0.0]


def test_a_refused_key_is_not_retried_and_is_masked(tei: StubServer) -> None:
    tei.script(Reply({"error": {"message": f"bad key {KEY}"}}, 401))
    with pytest.raises(RerankError, match=r"HTTP 401: bad key \*\*\*") as caught:
        client(tei, retries=3).rerank("q", ["x"])
    assert KEY not in str(caught.value) and caught.value.status == 401
    assert len(tei.received) == 1


def test_a_slow_server_is_a_timeout(tei: StubServer) -> None:
    tei.script(Reply(delay=5), Reply(delay=5))
    with pytest.raises(RerankError, match=r"no answer within 0\.2s") as caught:
        client(tei, timeout=0.2, retries=1).rerank("q", ["x"])
    assert caught.value.retryable
    assert len(tei.received) == 2


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="model name"):
        HTTPReranker("http://localhost:8080", flavour="cohere")
    with pytest.raises(ValueError, match="flavour"):
        HTTPReranker("http://localhost:8080", flavour="bge")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base URL"):
        HTTPReranker("localhost:8080")


# -- the window reranker -------------------------------------------------------------------------


class Broken(HashEmbedder):
    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        raise EmbeddingError("the model is away")


def test_window_reranker_scores_by_the_embedders_cosine() -> None:
    hashing = HashEmbedder(256)
    reranker = WindowReranker(hashing)
    assert isinstance(reranker, Reranker)
    assert reranker.name == "windows:hash:v2:256"
    texts = ["the flight to Tokyo", "a garden in Kyoto"]
    scores = reranker.rerank("flight to Tokyo", texts)
    (q,) = hashing.embed(["flight to Tokyo"], kind="query")
    assert scores == [cosine(q, v) for v in hashing.embed(texts, kind="document")]
    assert scores[0] > scores[1]
    assert reranker.rerank("q", []) == []
    with pytest.raises(RerankError, match="the model is away"):
        WindowReranker(Broken(64)).rerank("q", ["x"])


# -- search with a reranker ----------------------------------------------------------------------


def test_a_reranker_reorders_search_and_says_so_in_the_ranks(
    notes: LongTermMemory, tei: StubServer, scorer: Scorer
) -> None:
    rules = notes.search(ALICE, "notes", "trip flight", k=4)
    assert len(rules) == 4 and all("rerank" not in h.ranks for h in rules)
    first, *rest = ids(rules)
    # the reranker puts the rules' first last and agrees on the others' order
    words = {"n1": "Tokyo", "n2": "Kyoto", "n3": "passport", "n4": "vegetarian"}
    scorer.prefer = [words[i] for i in rest]
    notes.reranker = client(tei)
    hits = notes.search(ALICE, "notes", "trip flight", k=4)
    assert ids(hits)[0] == rest[0] and ids(hits).index(first) > 0
    assert ids(hits) != ids(rules)
    assert tei.last.body["query"] == "trip flight"
    assert texts_of(tei.last.body) == [h.item.text for h in rules]  # items: their own text
    by_id = {h.item.id: h for h in hits}
    assert by_id[first].ranks["rerank"] == 4 and by_id[rest[0]].ranks["rerank"] == 1
    for rule in rules:  # the rule ranks are kept beside the reranker's
        assert {k: v for k, v in by_id[rule.item.id].ranks.items() if k != "rerank"} == rule.ranks
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # k=1 still asks about the top RERANK_DEPTH: the answer can come from below k
    assert ids(notes.search(ALICE, "notes", "trip flight", k=1)) == [rest[0]]


def test_a_reranker_sees_the_window_of_each_conversation_turn(
    stores: Stores, tei: StubServer, scorer: Scorer
) -> None:
    mem = LongTermMemory(stores.memories, clock=lambda: T0, embedder=HashEmbedder(256))
    mem.add(
        ALICE,
        "chat",
        [
            MemoryItem(i, "alice", "chat", f"{who}: {text}", T0, metadata={"session": s})
            for i, s, who, text in TURNS
        ],
    )
    mem.embed_pending(ALICE, "chat")
    mem.build_layers(ALICE, "chat")
    rules = mem.search(ALICE, "chat", "How did the support group feel?", k=3)
    assert "D1:1" in ids(rules)
    scorer.prefer = ["sunrise"]
    mem.reranker = client(tei)
    hits = mem.search(ALICE, "chat", "How did the support group feel?", k=3)
    assert stores.memories is not None
    windows = {
        w.id: w.text for w in stores.memories.get_memories("alice", "chat~window", ids(rules))
    }
    assert texts_of(tei.last.body)[:3] == [windows[i] for i in ids(rules)]
    assert "Melanie: That sounds brave" in windows["D1:1"]  # the turn with its neighbour
    assert ids(hits) != ids(rules) and all("rerank" in h.ranks for h in hits)


FAILURES = {
    "500": Reply({"error": "boom"}, 500),
    "503": Reply({"error": "unavailable"}, 503),
    "timeout": Reply(delay=5),
    "not-json": Reply(b"<html>oops</html>"),
    "nan": Reply(b'[{"index": 0, "score": NaN}]'),
    "wrong-index": Reply(raw([{"index": "first", "score": 1.0}])),
    "duplicate-index": Reply(raw([{"index": 0, "score": 1.0}, {"index": 0, "score": 0.5}])),
    "out-of-range": Reply(raw([{"index": 99, "score": 1.0}])),
    "missing-scores": Reply(raw([{"index": 0, "score": 1.0}])),
    "no-score": Reply({"results": [{"index": i} for i in range(4)]}),
    "not-a-list": Reply({"error": None}),
}


@pytest.mark.parametrize("reply", FAILURES.values(), ids=FAILURES.keys())
def test_whatever_goes_wrong_search_answers_in_its_rule_order(
    notes: LongTermMemory,
    tei: StubServer,
    scorer: Scorer,
    reply: Reply,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rules = notes.search(ALICE, "notes", "trip flight", k=3)
    scorer.prefer = ["passport", "vegetarian"]
    notes.reranker = client(tei, timeout=0.3)
    tei.script(reply)
    caplog.clear()
    hits = notes.search(ALICE, "notes", "trip flight", k=3)
    assert hits == rules  # the same items, scores and ranks: nothing of a reranker
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "rule order" in warnings[0].getMessage()
    assert warnings[0].name == "relaystate.memory.longterm"
    assert ids(notes.search(ALICE, "notes", "trip flight", k=3)) != ids(rules)  # well again


class Custom:
    """A reranker of one's own, misbehaving as told."""

    name = "custom"

    def __init__(self, answer: Callable[[Sequence[str]], list[float]]) -> None:
        self.answer = answer

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.answer(texts)


def _raise_rerank(texts: Sequence[str]) -> list[float]:
    raise RerankError("down")


def _raise_other(texts: Sequence[str]) -> list[float]:
    raise KeyError("oops")


@pytest.mark.parametrize(
    "answer",
    [
        _raise_rerank,
        _raise_other,
        lambda texts: [1.0],
        lambda texts: [float("nan")] * len(texts),
        lambda texts: ["1"] * len(texts),
    ],
    ids=["rerank-error", "other-error", "too-few", "nan", "strings"],
)
def test_a_reranker_of_ones_own_that_fails_leaves_the_rule_order(
    notes: LongTermMemory, answer: Callable[[Sequence[str]], list[float]]
) -> None:
    rules = notes.search(ALICE, "notes", "trip flight", k=3)
    notes.reranker = Custom(answer)
    assert notes.search(ALICE, "notes", "trip flight", k=3) == rules


def test_rerank_weights_can_put_the_reranker_alone(
    notes: LongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = notes.search(ALICE, "notes", "trip flight", k=4)
    backwards = Custom(lambda texts: [float(n) for n in range(len(texts))])
    notes.reranker = backwards
    # fused 1:1, a reversed order keeps both ends first (a tie the rule order breaks)
    a, b, c, d = ids(rules)
    assert ids(notes.search(ALICE, "notes", "trip flight", k=4)) == [a, d, b, c]
    monkeypatch.setattr(longterm, "RERANK_WEIGHTS", {"rules": 0.0, "rerank": 1.0})
    assert ids(notes.search(ALICE, "notes", "trip flight", k=4)) == ids(rules)[::-1]


def test_no_reranker_and_no_rewriter_search_as_before(
    notes: LongTermMemory, stores: Stores
) -> None:
    plain = LongTermMemory(stores.memories, clock=lambda: T0, embedder=notes.embedder)
    assert notes.reranker is None and notes.rewriter is None
    assert notes.search(ALICE, "notes", "trip flight") == plain.search(
        ALICE, "notes", "trip flight"
    )


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "flavour", "model", "base"),
    [
        ("tei:http://localhost:8080", "tei", None, "http://localhost:8080"),
        ("TEI:http://gpu:8080/", "tei", None, "http://gpu:8080"),
        (
            "cohere:rerank-v3.5@https://api.cohere.com/v2",
            "cohere",
            "rerank-v3.5",
            "https://api.cohere.com/v2",
        ),
        (
            "jina:jina-reranker-v2-base-multilingual@https://api.jina.ai/v1",
            "cohere",
            "jina-reranker-v2-base-multilingual",
            "https://api.jina.ai/v1",
        ),
    ],
)
def test_config_builds_http_rerankers(
    spec: str, flavour: str, model: str | None, base: str
) -> None:
    built = reranker_from_config(spec, environ={"RELAYSTATE_RERANKER_API_KEY": KEY})
    assert isinstance(built, HTTPReranker)
    assert (built.flavour, built.model, built.base_url) == (flavour, model, base)
    assert KEY not in repr(built)


def test_config_none_env_and_key(tei: StubServer) -> None:
    assert reranker_from_config(environ={}) is None
    assert reranker_from_config("none", environ={"RELAYSTATE_RERANKER": "tei:http://x"}) is None
    assert reranker_from_config(" ", environ={}) is None
    env = {"RELAYSTATE_RERANKER": f"tei:{tei.url}", "RELAYSTATE_RERANKER_API_KEY": KEY}
    built = reranker_from_config(environ=env)
    assert built is not None
    built.rerank("q", ["x"])
    assert tei.last.headers["authorization"] == f"Bearer {KEY}"


def test_config_e5_windows_is_a_window_reranker(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeE5(HashEmbedder):  # no e5 in the tests: a stand-in of the same shape
        def __init__(self) -> None:
            super().__init__(64)

    monkeypatch.setattr(embed, "LocalE5Embedder", FakeE5)
    built = reranker_from_config("e5-windows", environ={})
    assert isinstance(built, WindowReranker) and built.name == "windows:hash:v2:64"


@pytest.mark.parametrize(
    ("spec", "environ", "says"),
    [
        ("bge", {}, r"reranker spec: 'bge' is no reranker"),
        ("tei:", {}, "is no reranker"),
        ("tei:localhost:8080", {}, "reranker spec: reranker base URL"),
        ("cohere:https://api.cohere.com/v2", {}, r"write cohere:MODEL@BASE_URL"),
        ("jina:model@", {}, r"write jina:MODEL@BASE_URL"),
        ("cohere:m@ftp://host", {}, "base URL"),
        ("e5-windows:large", {}, "is no reranker"),
        (None, {"RELAYSTATE_RERANKER": "word2vec"}, "RELAYSTATE_RERANKER: 'word2vec'"),
    ],
)
def test_config_refuses_bad_specs_naming_the_setting(
    spec: str | None, environ: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        reranker_from_config(spec, environ=environ)


# -- the command line ----------------------------------------------------------------------------


def cli(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "relaystate.cli", "memory", *args, "--store", store]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_cli_search_takes_a_reranker_and_refuses_a_bad_spec(
    tmp_path: Path, tei: StubServer, scorer: Scorer
) -> None:
    store = f"sqlite:///{tmp_path}/cli.db"
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i.id, "text": i.text}) + "\n" for i in NOTES))
    who = ["--user", "alice", "--namespace", "notes"]
    assert cli("import", *who, str(items), store=store).returncode == 0
    plain = cli("search", *who, "--json", "trip flight", store=store)
    assert plain.returncode == 0, plain.stderr
    rules = [h["id"] for h in json.loads(plain.stdout)["hits"]]
    scorer.prefer = ["passport"]
    reranked = cli(
        "search", *who, "--json", "trip flight", "--reranker", f"tei:{tei.url}", store=store
    )
    assert reranked.returncode == 0, reranked.stderr
    assert [h["id"] for h in json.loads(reranked.stdout)["hits"]] != rules
    assert tei.received and tei.last.body["query"] == "trip flight"
    for bad in (["--reranker", "word2vec"], ["--rewriter", "gpt"], ["--reranker", "tei:nohost"]):
        done = cli("search", *who, "trip", *bad, store=store)
        assert done.returncode == 2, (bad, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and "spec" in line and "Traceback" not in line
