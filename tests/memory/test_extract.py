"""Facts a chat model extracts into the memory graph, against a real local server speaking
the chat-completions protocol and a real SQLite store: what is asked, what is written and
found again by the graph's walk, what is refused (names and numbers the cited turn does not
have, turns never sent, dates that do not parse), and that a model that fails (late, 500,
no JSON, the wrong shape) costs the batch its facts and nothing else."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope, open_store
from relaystate.errors import ConfigError
from relaystate.memory.extract import (
    FACT,
    ChatFactExtractor,
    ExtractedFact,
    NoExtraction,
    extract_into_graph,
    extractor_from_config,
    fact_items,
    traced,
)
from relaystate.memory.graph import MemoryGraph
from relaystate.memory.longterm import LongTermMemory
from relaystate.model import MemoryItem
from relaystate.store import Stores

from ..llm.chat_server import ChatServer, Reply, completion, running

KEY = "sk-extract-secret-0815"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
USER, NS = "u1", "conv"
TURNS = [
    MemoryItem(
        "D1:1",
        USER,
        NS,
        "Caroline: I moved to Lisbon in 2019 and I work at Acme now.",
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        metadata={"speaker": "Caroline"},
    ),
    MemoryItem(
        "D1:2",
        USER,
        NS,
        "I painted a sunrise over the lake, it took 3 weeks.",
        datetime(2023, 5, 8, 14, 0, tzinfo=UTC),
        metadata={"speaker": "Melanie"},
    ),
    MemoryItem("D1:3", USER, NS, "我在臺北工作，住在信義區。", metadata={"speaker": "王小明"}),
]


def fact(subject: str, predicate: str, obj: str, turn: str, **dates: str | None) -> dict[str, Any]:
    return {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "valid_from": dates.get("valid_from"),
        "valid_until": dates.get("valid_until"),
        "turn": turn,
    }


def answer(*facts: dict[str, Any]) -> Reply:
    return Reply(completion(json.dumps({"facts": list(facts)}, ensure_ascii=False)))


GOOD = [
    fact("Caroline", "lives in", "Lisbon", "D1:1", valid_from="2019-01-01"),
    fact("Caroline", "works at", "Acme", "D1:1"),
    fact("Melanie", "painted", "a sunrise over the lake", "D1:2", valid_until="2023-05-08"),
]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with running() as chat:
        yield chat


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_store(f"sqlite:///{tmp_path}/store.db")
    yield opened
    opened.close()


@pytest.fixture
def graph(stores: Stores) -> MemoryGraph:
    return MemoryGraph(stores.working, clock=lambda: T0)


@pytest.fixture
def memory(stores: Stores) -> LongTermMemory:
    longterm = LongTermMemory(stores.memories, clock=lambda: T0)
    longterm.add(Scope.user(USER), NS, TURNS)
    return longterm


@pytest.fixture(autouse=True)
def _key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text


def extractor(server: ChatServer, **options: Any) -> ChatFactExtractor:
    options.setdefault("timeout", 2.0)
    options.setdefault("retries", 0)
    options.setdefault("backoff", 0.01)
    return ChatFactExtractor(server.url, "test-model", KEY, **options)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- what is asked, what is written ------------------------------------------------------


def test_the_request_carries_the_turns_and_a_strict_json_schema(
    server: ChatServer, graph: MemoryGraph
) -> None:
    server.script(answer(*GOOD))
    extract_into_graph(graph, USER, TURNS, extractor(server))
    sent = server.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.body
    assert body["model"] == "test-model" and body["temperature"] == 0
    system, user = body["messages"]
    assert system["role"] == "system" and "facts" in system["content"]
    assert user["role"] == "user"
    assert json.loads(user["content"]) == [
        {
            "id": "D1:1",
            "speaker": "Caroline",
            "time": "2023-05-08T13:56:00+00:00",
            "text": TURNS[0].text,
        },
        {
            "id": "D1:2",
            "speaker": "Melanie",
            "time": "2023-05-08T14:00:00+00:00",
            "text": TURNS[1].text,
        },
        {"id": "D1:3", "speaker": "王小明", "time": None, "text": TURNS[2].text},
    ]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "facts" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["facts"] and schema["additionalProperties"] is False
    each = schema["properties"]["facts"]["items"]
    assert set(each["required"]) == {
        "subject",
        "predicate",
        "object",
        "valid_from",
        "valid_until",
        "turn",
    }


def test_facts_are_written_traced_to_their_turn_and_found_by_the_walk(
    server: ChatServer, graph: MemoryGraph
) -> None:
    server.script(answer(*GOOD))
    report = extract_into_graph(graph, USER, TURNS, extractor(server))
    assert (report.written, report.refused, report.failed_batches) == (3, 0, 0)
    assert [f.turn for f in report.facts] == ["D1:1", "D1:1", "D1:2"]

    reached = {
        (r.fact.subject, r.fact.predicate, r.fact.object)
        for r in graph.around(USER, "Where does Caroline live?")
    }
    assert reached == {("Caroline", "lives in", "Lisbon"), ("Caroline", "works at", "Acme")}
    walked = [r.fact for r in graph.walk(USER, ["Lisbon"], hops=2)]
    assert {f.object for f in walked} == {"Lisbon", "Acme"}  # Lisbon -> Caroline -> Acme
    lives = next(f for f in walked if f.object == "Lisbon")
    assert lives.source == "extracted:D1:1" and lives.single is False
    assert lives.valid_from == datetime(2019, 1, 1, tzinfo=UTC)  # the fact's own start
    works = next(f for f in walked if f.object == "Acme")
    assert works.valid_from == TURNS[0].time  # unsaid: since the turn said it
    assert traced(lives) == ("D1:1", None)
    painted = graph.around(USER, "what did Melanie do?")[0].fact
    assert painted.source == "extracted:D1:2 until=2023-05-08"
    assert traced(painted) == ("D1:2", date(2023, 5, 8))


def test_a_rerun_writes_nothing_new(server: ChatServer, graph: MemoryGraph) -> None:
    server.script(answer(*GOOD), answer(*GOOD))
    first = extract_into_graph(graph, USER, TURNS, extractor(server))
    again = extract_into_graph(graph, USER, TURNS, extractor(server))
    assert (first.written, first.already) == (3, 0)
    assert (again.written, again.already, again.refused) == (0, 3, 0)
    assert len(graph.working.fact_history(USER, "Caroline")) == 2
    assert fact_items(first, NS) == fact_items(again, NS)


def test_batches_are_asked_one_after_another(server: ChatServer, graph: MemoryGraph) -> None:
    server.script(answer(GOOD[0]), answer(GOOD[2]))
    seen: list[int] = []
    report = extract_into_graph(
        graph, USER, TURNS[:2], extractor(server), batch=1, progress=seen.append
    )
    assert len(server.received) == 2 and seen == [1, 1]
    assert (report.batches, report.written) == (2, 2)
    # a fact citing a turn of another batch is not the turn it was sent
    server.script(answer(fact("Caroline", "works at", "Acme", "D1:1")))
    other = extract_into_graph(graph, USER, TURNS[1:2], extractor(server))
    assert (other.written, other.refused) == (0, 1)


# -- what is refused ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        fact("Caroline", "lives in", "Porto", "D1:1"),  # a name the turn does not have
        fact("Caroline", "moved in", "2018", "D1:1"),  # a number the turn does not have
        fact("Melanie", "painted for", "4 weeks", "D1:2"),
        fact("Caroline", "works at", "Acme Corp", "D1:1"),  # half a name is not enough
        fact("Ana", "lives in", "Lisbon", "D1:1"),  # a name only the model knows
        fact("Caroline", "lives in", "Lisbon", "D9:9"),  # a turn that was never sent
        fact("Caroline", "lives in", "Lisbon", "D1:1", valid_from="2019-13-40"),
        fact("Caroline", "lives in", "Lisbon", "D1:1", valid_from="last year"),
        fact(
            "Caroline",
            "lived in",
            "Lisbon",
            "D1:1",
            valid_from="2020-01-01",
            valid_until="2019-01-01",
        ),
        fact(" ", "lives in", "Lisbon", "D1:1"),
        fact("Caroline", "", "Lisbon", "D1:1"),
        fact("Caroline", "lives in", "lisbon " * 40, "D1:1"),
        fact("Caroline", "lives\u0000 in", "Lisbon", "D1:1"),
        fact("王小明", "住在", "台北市", "D1:3"),  # 市 is not in the turn
    ],
)
def test_a_fact_the_cited_turn_does_not_bear_out_is_refused(
    server: ChatServer, graph: MemoryGraph, caplog: pytest.LogCaptureFixture, bad: dict[str, Any]
) -> None:
    server.script(answer(bad, GOOD[1]))
    report = extract_into_graph(graph, USER, TURNS, extractor(server))
    assert (report.written, report.refused, report.failed_batches) == (1, 1, 0)
    assert [(f.subject, f.object) for f in report.facts] == [("Caroline", "Acme")]
    held = {f.object for f in graph.working.current_facts(USER)}
    assert held == {"Acme"}
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.DEBUG
    assert not warnings(caplog)


def test_names_are_compared_normalised_and_across_chinese_scripts(
    server: ChatServer, graph: MemoryGraph
) -> None:
    server.script(
        answer(
            fact("王小明", "works in", "台北", "D1:3"),  # 臺北 in the turn, Simplified here
            fact("王小明", "lives in", "信义区", "D1:3"),
            fact("CAROLINE", "works at", "ＡＣＭＥ", "D1:1"),  # case and full-width forms
            fact("Caroline", "moved to", "Lisbon", "D1:1"),
        )
    )
    report = extract_into_graph(graph, USER, TURNS, extractor(server))
    assert (report.written, report.refused) == (4, 0)
    found = {r.fact.object for r in graph.around(USER, "王小明在哪里工作？")}
    assert found == {"台北", "信义区"}


def test_dates_may_be_times_and_are_kept_with_the_fact(
    server: ChatServer, graph: MemoryGraph
) -> None:
    server.script(
        answer(
            fact(
                "Caroline",
                "lives in",
                "Lisbon",
                "D1:1",
                valid_from="2019-06-01T08:00:00+02:00",
                valid_until="2030-01-01",
            )
        )
    )
    report = extract_into_graph(graph, USER, TURNS, extractor(server))
    (only,) = report.facts
    assert only.valid_from == datetime.fromisoformat("2019-06-01T08:00:00+02:00")
    assert only.valid_until == date(2030, 1, 1)
    (stored,) = graph.working.current_facts(USER)
    assert stored.valid_from == datetime(2019, 6, 1, 6, tzinfo=UTC)


# -- a model that fails ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(completion(json.dumps({"facts": GOOD})), delay=1.5), "no answer within"),
        (Reply({"error": {"message": f"overloaded, key {KEY}"}}, 500), "HTTP 500"),
        (Reply(b"<html>bad gateway</html>"), "not valid JSON"),
        (Reply(completion("Caroline lives in Lisbon.")), "not valid JSON"),
        (Reply(completion(json.dumps({"facts": [{"subject": "Caroline"}]}))), "lacks"),
        (Reply(completion(json.dumps({"facts": GOOD, "more": 1}))), "unexpected keys"),
        (Reply(completion(json.dumps([GOOD]))), "expected object"),
        (Reply(completion(None, refusal="I cannot help with that")), "refused"),
    ],
)
def test_a_failed_batch_yields_no_facts_and_one_warning(
    server: ChatServer,
    graph: MemoryGraph,
    memory: LongTermMemory,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    why: str,
) -> None:
    server.script(reply)
    report = extract_into_graph(graph, USER, TURNS, extractor(server, timeout=0.5))
    assert (report.written, report.refused, report.failed_batches, report.facts) == (0, 0, 1, [])
    assert graph.working.current_facts(USER) == []
    (line,) = warnings(caplog)
    assert why in line and "going on" in line and "D1:1..D1:3" in line
    assert memory.count(Scope.user(USER), NS) == len(TURNS)  # the memories are intact
    assert [h.item.id for h in memory.search(Scope.user(USER), NS, "Lisbon")] == ["D1:1"]


def test_a_transient_failure_is_asked_again(server: ChatServer, graph: MemoryGraph) -> None:
    server.script(Reply({"error": "busy"}, 503), answer(*GOOD))
    report = extract_into_graph(graph, USER, TURNS, extractor(server, retries=1))
    assert report.written == 3 and len(server.received) == 2


def test_a_failed_batch_does_not_stop_the_next(
    server: ChatServer, graph: MemoryGraph, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Reply({"error": "down"}, 500), answer(GOOD[2]))
    report = extract_into_graph(graph, USER, TURNS[:2], extractor(server), batch=1)
    assert (report.failed_batches, report.written) == (1, 1)
    assert len(warnings(caplog)) == 1


def test_an_extractor_that_raises_costs_its_batch_only(graph: MemoryGraph) -> None:
    class Broken:
        def extract(self, items: Sequence[MemoryItem]) -> list[ExtractedFact]:
            raise RuntimeError("bug")

    report = extract_into_graph(graph, USER, TURNS, Broken())
    assert (report.failed_batches, report.written) == (1, 0)
    assert extract_into_graph(graph, USER, TURNS, NoExtraction()).written == 0


# -- fact documents ----------------------------------------------------------------------


def test_fact_items_are_documents_citing_their_turn(server: ChatServer, graph: MemoryGraph) -> None:
    server.script(answer(*GOOD))
    report = extract_into_graph(graph, USER, TURNS, extractor(server))
    docs = fact_items(report, NS)
    assert [d.text for d in docs] == [
        "Caroline lives in Lisbon",
        "Caroline works at Acme",
        "Melanie painted a sunrise over the lake",
    ]
    first = docs[0]
    assert first.namespace == NS + FACT == "conv~fact" and first.user_id == USER
    assert first.cites == ("D1:1",) and first.source == "fact"
    assert first.id.startswith("fact:") and len({d.id for d in docs}) == 3
    assert first.metadata["valid_from"] == "2019-01-01"
    assert docs[2].metadata["valid_until"] == "2023-05-08"
    assert fact_items(report.facts, NS, user_id="u2")[0].user_id == "u2"


# -- configuration -----------------------------------------------------------------------


def test_the_spec_names_the_extractor() -> None:
    assert extractor_from_config(None, {}) is None
    assert extractor_from_config("", {}) is None
    assert extractor_from_config(" None ", {}) is None
    made = extractor_from_config(
        "openai:gpt-4o-mini@http://127.0.0.1:9/v1", {"RELAYSTATE_EXTRACTOR_API_KEY": KEY}
    )
    assert isinstance(made, ChatFactExtractor)
    assert (made.model, made.base_url) == ("gpt-4o-mini", "http://127.0.0.1:9/v1")
    assert KEY not in repr(made)
    from_env = extractor_from_config(None, {"RELAYSTATE_EXTRACTOR": "openai:m@https://x.test/v1"})
    assert isinstance(from_env, ChatFactExtractor) and from_env.model == "m"


@pytest.mark.parametrize(
    ("spec", "env", "named"),
    [
        ("openai:gpt-4o-mini", {}, "extractor spec"),
        ("openai:@http://127.0.0.1/v1", {}, "extractor spec"),
        ("openai:m@", {}, "extractor spec"),
        ("openai:m@ftp://127.0.0.1/v1", {}, "extractor spec"),
        ("openai:m@http://user:pw@127.0.0.1/v1", {}, "extractor spec"),
        ("llama", {}, "extractor spec"),
        (None, {"RELAYSTATE_EXTRACTOR": "gpt-4o"}, "RELAYSTATE_EXTRACTOR"),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_the_setting(
    spec: str | None, env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        extractor_from_config(spec, env)


# -- the command line --------------------------------------------------------------------


def cli(
    *args: str, store: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "relaystate.cli", "memory", *args, "--store", store]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RELAYSTATE_EXTRACTOR")}
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**environ, **(env or {})},
    )


def jsonl(path: Path, items: list[MemoryItem]) -> Path:
    rows = [
        {
            "id": i.id,
            "text": i.text,
            "metadata": i.metadata,
            **({"time": i.time.isoformat()} if i.time else {}),
        }
        for i in items
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def test_import_with_an_extractor_writes_facts_and_says_how_many(
    server: ChatServer, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/cli.db"
    items = jsonl(tmp_path / "items.jsonl", TURNS)
    server.script(answer(*GOOD, fact("Caroline", "lives in", "Porto", "D1:1")))
    spec = f"openai:test-model@{server.url}"
    args = ["import", "--user", USER, "--namespace", NS, str(items), "--embedder", "none"]
    done = cli(*args, "--extractor", spec, store=store, env={"RELAYSTATE_EXTRACTOR_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    assert "Imported 3 items into u1/conv" in done.stdout
    assert "Facts: 3 written, 0 already held, 1 refused." in done.stdout
    assert server.last.headers["authorization"] == f"Bearer {KEY}"
    opened = open_store(store)
    try:
        graph = MemoryGraph(opened.working, clock=lambda: T0)
        assert {r.fact.object for r in graph.around(USER, "Caroline")} == {"Lisbon", "Acme"}
        # and search finds a turn by its fact: kept beside the namespace, credited to it
        found = LongTermMemory(opened.memories, clock=lambda: T0).search(
            Scope.user(USER), NS, "who painted a sunrise?", k=3
        )
        assert found[0].item.id == "D1:2" and found[0].ranks.get("fact") == 1
    finally:
        opened.close()

    server.script(
        Reply({"error": "down"}, 500), Reply({"error": "down"}, 500), Reply({"error": "down"}, 500)
    )
    again = cli(*args, "--json", store=store, env={"RELAYSTATE_EXTRACTOR": spec})
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["total"] == 3
    assert out["facts"] == {"written": 0, "already": 0, "refused": 0, "failed_batches": 1}
    assert "going on" in again.stderr and "Traceback" not in again.stderr


def test_import_with_a_bad_extractor_spec_is_one_error_and_writes_nothing(tmp_path: Path) -> None:
    items = jsonl(tmp_path / "items.jsonl", TURNS)
    db = tmp_path / "cli.db"
    args = ["import", "--user", USER, "--namespace", NS, str(items), "--extractor", "gpt-4o"]
    done = cli(*args, store=f"sqlite:///{db}")
    assert done.returncode == 2
    assert done.stderr.startswith("error: extractor spec: 'gpt-4o' is no extractor")
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not db.exists()
