"""The served API with the models the command line has: memory search reordered by a
reranker and split by a query rewriter, items added with an extractor whose facts reach the
graph and search in the background job; against local servers speaking their wire
protocols (/rerank, chat completions). Whatever a model does wrong, the API answers as
without it; ``serve`` refuses a spec it cannot read before it opens anything, and ``info``
says what is configured, never a key."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.extract import ChatFactExtractor
from relaystate.memory.longterm import LongTermMemory
from relaystate.memory.rerank import HTTPReranker
from relaystate.memory.rewrite import ChatQueryRewriter
from relaystate.server.state import ServerState

from ..llm.chat_server import completion
from ..support import cli
from ..wire import Reply, StubServer, running
from .test_api import Api

KEY = "sk-served-models-secret-2718"
NOTES = [
    {"id": "n1", "text": "trip: a window seat on the flight to Tokyo"},
    {"id": "n2", "text": "trip: the hotel in Kyoto has a garden"},
    {"id": "n3", "text": "trip: her passport expires in June"},
    {"id": "n4", "text": "trip: vegetarian meals on the long flight"},
]
WORDS = {"n1": "Tokyo", "n2": "Kyoto", "n3": "passport", "n4": "vegetarian"}
TURNS = [
    {
        "id": "D1:1",
        "text": "Caroline: we brought Oscar home from the shelter last week",
        "time": "2023-05-08T13:56:00Z",
        "metadata": {"speaker": "Caroline"},
    },
    {
        "id": "D1:2",
        "text": "Melanie: I painted a sunrise over the lake",
        "time": "2023-05-08T14:00:00Z",
        "metadata": {"speaker": "Melanie"},
    },
]
ADOPTED = {
    "subject": "Caroline",
    "predicate": "adopted",
    "object": "Oscar",
    "valid_from": None,
    "valid_until": None,
    "turn": "D1:1",
}


class Scorer:
    """A /rerank server's default answer (TEI's shape): texts holding an earlier word of
    ``prefer`` score higher."""

    def __init__(self) -> None:
        self.prefer: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        def score(text: str) -> float:
            return next((1 - n / 100 for n, w in enumerate(self.prefer) if w in text), 0.0)

        rows = [{"index": i, "score": score(t)} for i, t in enumerate(body["texts"])]
        return Reply(json.dumps(sorted(rows, key=lambda r: -r["score"])).encode())


def unscripted(_: dict[str, Any]) -> Reply:
    return Reply({"error": "unscripted"}, 599)


@pytest.fixture
def scorer() -> Scorer:
    return Scorer()


@pytest.fixture
def tei(scorer: Scorer) -> Iterator[StubServer]:
    with running(scorer, path="") as stub:
        yield stub


@pytest.fixture
def chat() -> Iterator[StubServer]:
    with running(unscripted) as stub:
        yield stub


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    """An app over a SQLite file with the models given (the hash embedder always)."""
    made: list[Api] = []

    def build(**models: Any) -> Api:
        api = Api(tmp_path, embedder=HashEmbedder(dimension=256), **models)
        made.append(api)
        return api

    yield build
    for api in made:
        state(api).close()
        api.rt.close()


def state(api: Api) -> ServerState:
    found: ServerState = api.client.app.state.relaystate  # type: ignore[attr-defined]
    return found


def hits(api: Api, q: str, **params: object) -> list[dict[str, Any]]:
    found = api.ok("alice", "GET", "/v1/memory/notes/search", params={"q": q, **params})
    listed: list[dict[str, Any]] = found["hits"]
    return listed


def ids(found: Sequence[dict[str, Any]]) -> list[str]:
    return [h["id"] for h in found]


def rule_order(api: Api, q: str, k: int = 4) -> list[str]:
    """The order the rules give, with no model: the same store, a memory of its own."""
    memory = state(api).memory
    assert memory is not None
    plain = LongTermMemory(memory.memories, clock=api.rt.clock, embedder=memory.embedder)
    return [h.item.id for h in plain.search(Scope.user("alice"), "notes", q, k=k)]


def reranker(stub: StubServer, **options: Any) -> HTTPReranker:
    return HTTPReranker(stub.url, None, KEY, flavour="tei", **{"retries": 0, **options})


def chat_client(kind: type[Any], stub: StubServer) -> Any:
    return kind(stub.url, "test-model", KEY, timeout=2.0, retries=0, backoff=0.01)


def added(api: Api, items: list[dict[str, Any]], ns: str = "notes") -> None:
    api.ok("alice", "POST", f"/v1/memory/{ns}/items", json={"items": items})
    state(api).settled(30)  # the background job: vectors, layers, facts


# -- a reranker and a rewriter ----------------------------------------------------------------
def test_a_reranker_reorders_the_apis_search_and_says_so(
    make: Any, tei: StubServer, scorer: Scorer
) -> None:
    api = make(reranker=reranker(tei, timeout=2.0))
    added(api, NOTES)
    rules = rule_order(api, "trip flight")
    first, *rest = rules
    scorer.prefer = [WORDS[i] for i in rest]  # the rules' first is the reranker's last
    found = hits(api, "trip flight", k=4)
    assert ids(found) != rules and ids(found)[0] == rest[0]
    assert all("rerank" in h["ranks"] for h in found)
    by_id = {h["id"]: h for h in found}
    assert by_id[first]["ranks"]["rerank"] == 4 and by_id[rest[0]]["ranks"]["rerank"] == 1
    assert tei.last.path == "/rerank" and tei.last.body["query"] == "trip flight"
    assert tei.last.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "reply",
    [Reply(delay=5), Reply(b"<html>oops</html>"), Reply(b'[{"index": 99, "score": 1}]')],
    ids=["timeout", "not-json", "out-of-range"],
)
def test_a_reranker_that_fails_leaves_the_rule_order(
    make: Any, tei: StubServer, scorer: Scorer, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    api = make(reranker=reranker(tei, timeout=0.3))
    added(api, NOTES)
    rules = rule_order(api, "trip flight")
    scorer.prefer = ["passport", "vegetarian"]
    tei.script(reply)
    caplog.clear()
    found = hits(api, "trip flight", k=4)  # 200 all the same
    assert ids(found) == rules and not any("rerank" in h["ranks"] for h in found)
    assert any("rule order" in r.getMessage() for r in caplog.records if r.levelno >= 30)
    assert "rerank" in hits(api, "trip flight", k=4)[0]["ranks"]  # well again


def test_a_rewriter_splits_the_apis_search(make: Any, chat: StubServer) -> None:
    api = make(rewriter=chat_client(ChatQueryRewriter, chat))
    added(api, NOTES)
    chat.script(Reply(completion(json.dumps({"queries": ["garden", "passport"]}))))
    found = hits(api, "what must I not forget", mode="keyword")
    assert set(ids(found)) == {"n2", "n3"}  # the question alone finds nothing
    assert all("rewrite" in h["ranks"] for h in found)
    assert chat.last.path == "/v1/chat/completions"
    assert chat.last.body["messages"][1]["content"] == "what must I not forget"
    # a rewriter that fails searches the question alone
    chat.script(Reply({"error": "down"}, 500))
    assert hits(api, "Kyoto garden", mode="keyword")[0]["id"] == "n2"


# -- an extractor -----------------------------------------------------------------------------
def test_items_added_with_an_extractor_get_their_facts_in_the_background(
    make: Any, chat: StubServer
) -> None:
    api = make(extractor=chat_client(ChatFactExtractor, chat))
    chat.script(Reply(completion(json.dumps({"facts": [ADOPTED]}))))
    added(api, TURNS, ns="conv")
    graph = state(api).layers.graph  # type: ignore[union-attr]
    assert graph is not None
    reached = {
        (r.fact.subject, r.fact.predicate, r.fact.object) for r in graph.around("alice", "Oscar")
    }
    assert reached == {("Caroline", "adopted", "Oscar")}
    asked = json.loads(chat.last.body["messages"][1]["content"])
    assert [t["id"] for t in asked] == ["D1:1", "D1:2"]
    assert chat.last.headers["authorization"] == f"Bearer {KEY}"
    # search finds the turn by the fact's word, which the turn does not have
    found = api.ok("alice", "GET", "/v1/memory/conv/search", params={"q": "who adopted"})["hits"]
    assert found[0]["id"] == "D1:1" and found[0]["ranks"].get("fact") == 1
    # the next request's items are extracted, not the namespace's again
    chat.script(Reply(completion(json.dumps({"facts": []}))))
    more = {"id": "D1:3", "text": "Caroline: Oscar loves the park", "metadata": {}}
    added(api, [more], ns="conv")
    assert [t["id"] for t in json.loads(chat.last.body["messages"][1]["content"])] == ["D1:3"]
    assert len(chat.received) == 2


def test_an_extractor_that_fails_costs_the_facts_only(
    make: Any, chat: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    api = make(extractor=chat_client(ChatFactExtractor, chat))
    chat.script(Reply({"error": "down"}, 500))
    answer = api.ok("alice", "POST", "/v1/memory/conv/items", json={"items": TURNS})
    assert answer == {"added": 2, "total": 2}
    state(api).settled(30)
    assert len(chat.received) == 1
    graph = state(api).layers.graph  # type: ignore[union-attr]
    assert graph is not None and graph.around("alice", "Oscar") == []
    found = api.ok("alice", "GET", "/v1/memory/conv/search", params={"q": "Oscar shelter"})
    assert ids(found["hits"])[0] == "D1:1" and "fact" not in found["hits"][0]["ranks"]
    assert any("going on" in r.getMessage() for r in caplog.records if r.levelno >= 30)


def test_without_an_extractor_nothing_is_asked(make: Any, chat: StubServer) -> None:
    api = make(reranker=None, rewriter=None, extractor=None)
    added(api, TURNS, ns="conv")
    assert chat.received == []
    assert state(api).layers.graph.around("alice", "Oscar") == []  # type: ignore[union-attr]


# -- the command line -------------------------------------------------------------------------
def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--reranker", "reranker spec: 'bad' is no reranker"),
        ("--rewriter", "rewriter spec: 'bad' is no rewriter"),
        ("--extractor", "extractor spec: 'bad' is no extractor"),
    ],
)
def test_serve_refuses_a_bad_model_spec_before_it_opens_anything(
    option: str, says: str, tmp_path: Path
) -> None:
    db = tmp_path / "serve.db"
    proc = cli(
        "serve", "--store", f"sqlite:///{db}", "--port", _free_port(), option, "bad", cwd=tmp_path
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}"), proc.stderr
    assert proc.stdout == "" and not db.exists()


def test_info_says_which_models_are_configured_never_a_key(tmp_path: Path) -> None:
    env = {
        "RELAYSTATE_RERANKER": "tei:http://127.0.0.1:9",
        "RELAYSTATE_RERANKER_API_KEY": KEY,
        "RELAYSTATE_REWRITER": "none",
        "RELAYSTATE_REWRITER_API_KEY": KEY,
        "RELAYSTATE_EXTRACTOR": f"openai:{KEY}",  # unusable, and it holds the key
        "RELAYSTATE_EXTRACTOR_API_KEY": KEY,
    }
    shown = cli("info", "--store", f"sqlite:///{tmp_path}/info.db", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line for line in shown.stdout.splitlines() if line.strip()}
    assert lines["reranker"] == (
        "reranker   tei:http://127.0.0.1:9 (from $RELAYSTATE_RERANKER; key from "
        "$RELAYSTATE_RERANKER_API_KEY)"
    )
    assert lines["rewriter"] == "rewriter   none ($RELAYSTATE_REWRITER or --rewriter to change it)"
    assert lines["extractor"].startswith("extractor  unusable: RELAYSTATE_EXTRACTOR: write openai")
    assert KEY not in shown.stdout + shown.stderr
    said = json.loads(
        cli(
            "info",
            "--json",
            "--store",
            f"sqlite:///{tmp_path}/info.db",
            cwd=tmp_path,
            env={**env, "RELAYSTATE_RERANKER": "", "RELAYSTATE_EXTRACTOR": ""},
        ).stdout
    )
    assert said["reranker"].startswith("none") and said["extractor"].startswith("none")
    assert not (tmp_path / "info.db").exists()
