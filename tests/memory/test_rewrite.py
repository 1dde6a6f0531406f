"""Query rewriting: the chat wire against a local server speaking it, every bad answer or
failure falling back to the question alone, the sub-queries' searches fused in long-term
memory search, and the config spec."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope, open_store
from relaystate.errors import ConfigError
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.longterm import Hit, LongTermMemory
from relaystate.memory.rewrite import (
    MAX_QUERIES,
    ChatQueryRewriter,
    NoRewrite,
    QueryRewriter,
    rewriter_from_config,
)
from relaystate.model import MemoryItem
from relaystate.store import Stores

from ..wire import Reply, StubServer, running

KEY = "sk-rewrite-secret-2024"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
ALICE = Scope.user("alice")
QUESTION = "What do Caroline and Melanie both enjoy?"
NOTES = [
    MemoryItem("c1", "alice", "notes", "Caroline loves hiking in the mountains", T0),
    MemoryItem("c2", "alice", "notes", "Caroline and Melanie enjoy long walks", T0),
    MemoryItem("m1", "alice", "notes", "Melanie paints landscapes every weekend", T0),
    MemoryItem("x1", "alice", "notes", "The weather in Paris was rainy", T0),
    MemoryItem("p1", "alice", "notes", "pottery class on Tuesday evenings", T0),
]


def completion(content: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
    }


class Model:
    """The server's default answer: ``queries`` as the JSON the rewriter asks for."""

    def __init__(self) -> None:
        self.queries: list[Any] = ["Caroline hobbies", "Melanie hobbies"]

    def __call__(self, body: dict[str, Any]) -> Reply:
        return Reply(completion(json.dumps({"queries": self.queries})))


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
def server(model: Model) -> Iterator[StubServer]:
    with running(model) as stub:
        yield stub


@pytest.fixture(autouse=True)
def _key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text


def rewriter(server: StubServer, **options: Any) -> ChatQueryRewriter:
    options.setdefault("timeout", 2.0)
    options.setdefault("retries", 0)
    options.setdefault("backoff", 0.01)
    return ChatQueryRewriter(server.url, "rewrite-test", KEY, **options)


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_no_rewrite_is_the_question_alone() -> None:
    assert isinstance(NoRewrite(), QueryRewriter)
    assert NoRewrite().rewrite(QUESTION) == [QUESTION]


def test_chat_rewriter_asks_for_queries_and_puts_the_question_first(server: StubServer) -> None:
    chat = rewriter(server)
    assert isinstance(chat, QueryRewriter)
    assert chat.rewrite(QUESTION) == [QUESTION, "Caroline hobbies", "Melanie hobbies"]
    sent = server.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "rewrite-test" and sent.body["temperature"] == 0
    system, user = sent.body["messages"]
    assert system["role"] == "system" and "search queries" in system["content"]
    assert user == {"role": "user", "content": QUESTION}
    schema = sent.body["response_format"]["json_schema"]
    assert schema["name"] == "search_queries" and schema["strict"] is True
    assert schema["schema"]["required"] == ["queries"]
    assert KEY not in repr(chat)


def test_repeated_queries_and_the_question_itself_come_once(
    server: StubServer, model: Model
) -> None:
    model.queries = [QUESTION.upper(), "Caroline  hobbies", "caroline hobbies"]
    assert rewriter(server).rewrite(QUESTION) == [QUESTION, "Caroline hobbies"]


BAD = {
    "not-json": Reply(completion("Sure! Here are some queries: hiking, painting")),
    "no-queries": Reply(completion(json.dumps({"query": "hiking"}))),
    "extra-key": Reply(completion(json.dumps({"queries": ["a"], "why": "b"}))),
    "none": Reply(completion(json.dumps({"queries": []}))),
    "too-many": Reply(completion(json.dumps({"queries": ["q"] * (MAX_QUERIES + 1)}))),
    "empty-text": Reply(completion(json.dumps({"queries": ["hiking", "  "]}))),
    "a-number": Reply(completion(json.dumps({"queries": ["hiking", 7]}))),
    "not-a-list": Reply(completion(json.dumps({"queries": "hiking"}))),
    "nul": Reply(completion(json.dumps({"queries": ["hik\u0000ing"]}))),
    "cut-off": Reply(completion(json.dumps({"queries": ["a"]}), finish="length")),
    "no-choices": Reply({"choices": []}),
    "html": Reply(b"<html>bad gateway</html>"),
    "500": Reply({"error": {"message": "boom"}}, 500),
    "503": Reply({"error": {"message": "overloaded"}}, 503),
    "401": Reply({"error": {"message": f"bad key {KEY}"}}, 401),
    "timeout": Reply(delay=5),
}


@pytest.mark.parametrize("reply", BAD.values(), ids=BAD.keys())
def test_a_bad_answer_or_failure_is_the_question_alone_and_one_warning(
    server: StubServer, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(reply)
    caplog.clear()
    assert rewriter(server, timeout=0.3).rewrite(QUESTION) == [QUESTION]
    [warning] = warnings(caplog)
    assert "searching the question as it is" in warning.getMessage()
    assert rewriter(server).rewrite(QUESTION)[1:] == ["Caroline hobbies", "Melanie hobbies"]


def test_a_transient_failure_is_retried(server: StubServer) -> None:
    server.script(Reply({"error": {"message": "busy"}}, 503))
    assert len(rewriter(server, retries=1).rewrite(QUESTION)) == 3
    assert len(server.received) == 2


# -- search with a rewriter ----------------------------------------------------------------------


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


class Fixed:
    def __init__(self, *queries: str) -> None:
        self.queries = list(queries)
        self.asked: list[str] = []

    def rewrite(self, question: str) -> list[str]:
        self.asked.append(question)
        return self.queries


def test_sub_queries_are_searched_and_fused(
    notes: LongTermMemory, server: StubServer, model: Model
) -> None:
    alone = notes.search(ALICE, "notes", "hobbies", k=5, mode="keyword")
    assert alone == []  # no note says "hobbies"
    model.queries = ["pottery class", "paints landscapes"]
    notes.rewriter = rewriter(server)
    hits = notes.search(ALICE, "notes", "hobbies", k=5, mode="keyword")
    assert set(ids(hits)) == {"p1", "m1"}
    assert all("rewrite" in h.ranks and "keyword" in h.ranks for h in hits)
    assert [h.ranks["rewrite"] for h in hits] == [1, 2]
    assert server.last.body["messages"][1]["content"] == "hobbies"


def test_fusion_ranks_what_several_queries_find_first(notes: LongTermMemory) -> None:
    notes.rewriter = Fixed("Caroline hiking", "Melanie walks")
    hits = notes.search(ALICE, "notes", "Caroline Melanie", k=3, mode="keyword")
    assert ids(hits)[0] == "c2"  # found by all three searches
    assert {"c1", "m1"} & set(ids(hits))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_a_rewriter_giving_nothing_new_searches_as_without_one(
    notes: LongTermMemory, stores: Stores
) -> None:
    plain = LongTermMemory(stores.memories, clock=lambda: T0, embedder=notes.embedder)
    expected = plain.search(ALICE, "notes", QUESTION)
    for given in (NoRewrite(), Fixed(QUESTION), Fixed(), Fixed("", "\u0000x")):
        notes.rewriter = given
        assert notes.search(ALICE, "notes", QUESTION) == expected, given


def test_a_rewriter_that_raises_still_answers(
    notes: LongTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    class Raising:
        def rewrite(self, question: str) -> list[str]:
            raise RuntimeError("model crashed")

    expected = notes.search(ALICE, "notes", QUESTION)
    notes.rewriter = Raising()
    caplog.clear()
    assert notes.search(ALICE, "notes", QUESTION) == expected
    [warning] = warnings(caplog)
    assert "model crashed" in warning.getMessage()


def test_a_rewriter_and_a_reranker_together(notes: LongTermMemory) -> None:
    notes.rewriter = Fixed("Melanie paints", "pottery class")
    fused = ids(notes.search(ALICE, "notes", "hobbies", k=3, mode="keyword"))
    assert len(fused) == 3

    class Demote:
        """Puts the fusion's first last, the others in their order."""

        name = "demote"

        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            order = [*fused[1:], fused[0]]
            return [-float(order.index(i)) for i in ids_of(texts)]

    def ids_of(texts: Sequence[str]) -> list[str]:
        return [next(n.id for n in NOTES if n.text == t) for t in texts]

    notes.reranker = Demote()
    hits = notes.search(ALICE, "notes", "hobbies", k=3, mode="keyword")
    assert ids(hits)[0] == fused[1]
    assert {"rewrite", "rerank", "keyword"} <= set(hits[0].ranks)


# -- configuration ---------------------------------------------------------------------------


def test_config_builds_a_chat_rewriter_with_its_own_key(server: StubServer) -> None:
    assert rewriter_from_config(environ={}) is None
    assert rewriter_from_config("none", environ={"RELAYSTATE_REWRITER": "openai:m@x"}) is None
    env = {
        "RELAYSTATE_REWRITER": f"openai:rewrite-test@{server.url}",
        "RELAYSTATE_REWRITER_API_KEY": KEY,
        "RELAYSTATE_MODEL_API_KEY": "not-this-one",
    }
    built = rewriter_from_config(environ=env)
    assert isinstance(built, ChatQueryRewriter) and built.model == "rewrite-test"
    built.rewrite(QUESTION)
    assert server.last.headers["authorization"] == f"Bearer {KEY}"
    spec = rewriter_from_config(f"openai:gpt-4o-mini@{server.url}", environ={})
    assert isinstance(spec, ChatQueryRewriter) and spec.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("spec", "environ", "says"),
    [
        ("gpt", {}, r"rewriter spec: 'gpt' is no rewriter"),
        ("openai:gpt-4o", {}, r"write openai:MODEL@BASE_URL"),
        ("openai:@http://x", {}, r"write openai:MODEL@BASE_URL"),
        ("openai:m@localhost", {}, "rewriter spec: model base URL"),
        (None, {"RELAYSTATE_REWRITER": "t5"}, "RELAYSTATE_REWRITER: 't5'"),
    ],
)
def test_config_refuses_bad_specs_naming_the_setting(
    spec: str | None, environ: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        rewriter_from_config(spec, environ=environ)
