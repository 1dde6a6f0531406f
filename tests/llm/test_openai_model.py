"""The OpenAI-compatible model against a real local server speaking the chat-completions protocol.

Every test scripts the server's answers, then checks both what the client sent and that the
client used an answer only after validating it: anything malformed, off schema, refused or
late comes back as None (or, for ``rephrase``, as the unchanged reply), never as an exception.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from relaystate import Slot
from relaystate.llm import (
    Model,
    OpenAICompatibleModel,
    RouteCandidate,
    RouteChoice,
    RuleModel,
    SlotSpec,
    default_model,
)

from .chat_server import ChatServer, Reply, completion, running

KEY = "sk-test-secret-4711"
TODAY = date(2027, 1, 21)
CANDIDATES = [
    RouteCandidate("task-flight", "book a flight to Berlin"),
    RouteCandidate("task-weather", "weather forecast"),
]
SLOTS = [
    SlotSpec("destination", "text", "the city to fly to"),
    SlotSpec("date", "date", "the day of departure"),
    SlotSpec("passengers", "number", "how many people travel"),
    SlotSpec("cabin", "choice", "the cabin class", ["economy", "business"]),
]


# -- the server ------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with running() as chat:
        yield chat


@pytest.fixture(autouse=True)
def _key_never_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="relaystate")
    yield
    assert KEY not in caplog.text
    assert "unexpectedly" not in caplog.text  # every failure was an anticipated one


def model(server: ChatServer, **options: Any) -> OpenAICompatibleModel:
    options.setdefault("timeout", 2.0)
    options.setdefault("retries", 2)
    options.setdefault("backoff", 0.01)
    return OpenAICompatibleModel(server.url, KEY, "test-model", **options)


def answer(value: Any) -> Reply:
    return Reply(completion(json.dumps(value)))


GOOD_SLOTS = {"destination": "Berlin", "date": "2027-01-22", "passengers": 2, "cabin": "business"}


# -- good answers and what was sent ----------------------------------------------------------


def test_route_sends_a_strict_schema_of_candidate_ids_and_uses_a_valid_pick(
    server: ChatServer,
) -> None:
    server.script(answer({"id": "task-weather", "confidence": 0.9}))
    choice = model(server).route("will it rain there?", CANDIDATES, language="en")
    assert choice == RouteChoice("task-weather", 0.9)

    sent = server.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body["model"] == "test-model"
    assert sent.body["temperature"] == 0
    assert sent.body["messages"][0]["role"] == "system"
    assert "task-flight: book a flight to Berlin" in sent.body["messages"][0]["content"]
    assert sent.body["messages"][-1] == {"role": "user", "content": "will it rain there?"}
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "route_choice"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["confidence", "id"]
    assert schema["properties"]["id"]["enum"] == ["task-flight", "task-weather", None]
    assert schema["properties"]["confidence"]["type"] == "number"


def test_extract_sends_slot_properties_typed_by_kind_and_returns_the_values(
    server: ChatServer,
) -> None:
    server.script(answer(GOOD_SLOTS))
    values = model(server).extract(
        "two of us to Berlin tomorrow, business", SLOTS, language="en", today=TODAY
    )
    assert values == GOOD_SLOTS

    body = server.last.body
    assert "2027-01-21" in body["messages"][0]["content"]  # relative dates need today
    fmt = body["response_format"]["json_schema"]
    assert fmt["name"] == "slot_values" and fmt["strict"] is True
    schema = fmt["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["destination", "date", "passengers", "cabin"]
    props = schema["properties"]
    assert props["destination"]["type"] == ["string", "null"]
    assert props["date"]["type"] == ["string", "null"] and "pattern" in props["date"]
    assert props["passengers"]["type"] == ["number", "null"]
    assert props["cabin"]["enum"] == ["economy", "business", None]
    assert props["cabin"]["description"] == "the cabin class"


def test_extract_leaves_out_what_the_message_does_not_state(server: ChatServer) -> None:
    server.script(
        answer({"destination": " Berlin ", "date": None, "passengers": None, "cabin": None})
    )
    assert model(server).extract("to Berlin", SLOTS, language="en", today=TODAY) == {
        "destination": "Berlin"
    }


def test_a_json_answer_in_a_markdown_fence_is_still_validated_and_used(server: ChatServer) -> None:
    fenced = "```json\n" + json.dumps({"id": "task-flight", "confidence": 1}) + "\n```"
    server.script(Reply(completion(fenced)))
    assert model(server).route("Berlin", CANDIDATES, language="en") == RouteChoice(
        "task-flight", 1.0
    )


def test_without_a_key_no_authorization_header_is_sent(server: ChatServer) -> None:
    server.script(answer({"id": "task-flight", "confidence": 0.5}))
    local = OpenAICompatibleModel(server.url + "/", None, "llama", timeout=2)
    assert local.route("fly", CANDIDATES, language="en") == RouteChoice("task-flight", 0.5)
    assert "authorization" not in server.last.headers
    assert server.last.path == "/v1/chat/completions"


# -- answers that must not be used -----------------------------------------------------------


def test_a_body_that_is_not_json_gives_none_without_retrying(server: ChatServer) -> None:
    server.script(Reply(b"<html>502 from a proxy</html>"), answer({"id": "task-flight"}))
    assert model(server).route("fly", CANDIDATES, language="en") is None
    assert len(server.received) == 1


def test_http_500_is_retried_and_the_next_good_answer_used(server: ChatServer) -> None:
    server.script(
        Reply({"error": {"message": "overloaded"}}, status=500),
        answer({"id": "task-flight", "confidence": 0.8}),
    )
    assert model(server).route("fly", CANDIDATES, language="en") == RouteChoice("task-flight", 0.8)
    assert len(server.received) == 2


def test_http_errors_that_persist_give_none_after_the_retries(server: ChatServer) -> None:
    server.script(*[Reply({"error": {"message": "down"}}, status=503)] * 3)
    assert model(server, retries=2).route("fly", CANDIDATES, language="en") is None
    assert len(server.received) == 3


def test_401_is_not_retried_and_the_echoed_key_is_not_logged(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    server.script(Reply(echo, status=401), answer({"id": "task-flight", "confidence": 1}))
    assert model(server).route("fly", CANDIDATES, language="en") is None
    assert len(server.received) == 1
    assert "HTTP 401" in caplog.text and "***" in caplog.text
    assert KEY not in caplog.text
    assert KEY not in repr(model(server))


@pytest.mark.parametrize(
    "content",
    [
        {"id": "task-hotel", "confidence": 0.9},  # not a candidate
        {"id": "task-flight", "confidence": "high"},  # wrong type
        {"id": "task-flight", "confidence": 1.7},  # outside [0, 1]
        {"id": "task-flight", "confidence": True},  # a boolean is not a number
        {"id": "task-flight"},  # missing key
        {"id": "task-flight", "confidence": 0.9, "reason": "Berlin"},  # extra key
        ["task-flight"],  # not an object
    ],
    ids=["unknown-id", "wrong-type", "out-of-range", "bool", "missing", "extra", "array"],
)
def test_a_route_answer_off_schema_gives_none(server: ChatServer, content: Any) -> None:
    server.script(answer(content))
    assert model(server).route("fly", CANDIDATES, language="en") is None
    assert len(server.received) == 1


def test_a_route_the_model_cannot_tell_gives_none(server: ChatServer) -> None:
    server.script(answer({"id": None, "confidence": 0.2}))
    assert model(server).route("hmm", CANDIDATES, language="en") is None


@pytest.mark.parametrize(
    "change",
    [
        {"passengers": "two"},  # wrong type
        {"passengers": True},  # bool is not a number
        {"cabin": "first"},  # choice outside the enum
        {"cabin": "Business"},  # enums are exact
        {"date": "tomorrow"},  # not YYYY-MM-DD
        {"date": "2027-02-30"},  # no such day
        {"destination": 42},  # text must be a string
        {"seat": "12A"},  # extra key
    ],
    ids=[
        "str-number",
        "bool-number",
        "off-enum",
        "enum-case",
        "relative",
        "no-day",
        "int",
        "extra",
    ],
)
def test_an_extraction_with_one_bad_value_is_discarded_whole(
    server: ChatServer, change: dict[str, Any]
) -> None:
    server.script(answer({**GOOD_SLOTS, **change}))
    assert model(server).extract("...", SLOTS, language="en", today=TODAY) is None


def test_an_extraction_missing_a_slot_key_is_discarded(server: ChatServer) -> None:
    server.script(answer({"destination": "Berlin", "date": None, "passengers": 2}))
    assert model(server).extract("...", SLOTS, language="en", today=TODAY) is None


@pytest.mark.parametrize(
    "body",
    [
        completion("{'id': 'task-flight'}"),  # content not JSON
        completion('{"id": "task-flight", "confidence": NaN}'),  # NaN is not JSON
        completion('{"id": "task-hotel", "id": "task-flight", "confidence": 1}'),  # dup key
        completion(None),  # no content
        completion('{"id": "task-flight", "confi', finish="length"),  # cut off
        {"choices": []},
        {"choices": [{"message": "task-flight"}]},
        {"object": "chat.completion"},
        [1, 2, 3],
    ],
    ids=[
        "content",
        "nan",
        "dup",
        "no-content",
        "length",
        "no-choices",
        "bad-message",
        "no-key",
        "array",
    ],
)
def test_malformed_completions_give_none(server: ChatServer, body: Any) -> None:
    server.script(Reply(json.dumps(body).encode()))
    assert model(server).route("fly", CANDIDATES, language="en") is None
    assert len(server.received) == 1


def test_a_refusal_gives_none(server: ChatServer, caplog: pytest.LogCaptureFixture) -> None:
    server.script(Reply(completion(None, refusal="I can't help with that.")))
    assert model(server).extract("...", SLOTS, language="en", today=TODAY) is None
    assert "refused" in caplog.text


# -- slow and absent servers -----------------------------------------------------------------


def test_a_slow_answer_times_out_is_retried_and_gives_none_in_bounded_time(
    server: ChatServer,
) -> None:
    slow = Reply(completion(json.dumps({"id": "task-flight", "confidence": 1})), delay=5)
    server.script(slow, slow)
    started = time.monotonic()
    assert model(server, timeout=0.3, retries=1).route("fly", CANDIDATES, language="en") is None
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 1.5
    assert len(server.received) == 2


def test_a_body_trickling_past_the_deadline_is_cut_off(server: ChatServer) -> None:
    trickling = Reply(completion(json.dumps({"id": "task-flight", "confidence": 1})), trickle=0.05)
    server.script(trickling)
    started = time.monotonic()
    assert model(server, timeout=0.3, retries=0).route("fly", CANDIDATES, language="en") is None
    assert time.monotonic() - started < 0.8


def test_a_slow_first_attempt_then_a_good_one_is_used(server: ChatServer) -> None:
    good = completion(json.dumps({"id": "task-flight", "confidence": 0.7}))
    server.script(Reply(good, delay=5), Reply(good))
    choice = model(server, timeout=0.3, retries=1).route("fly", CANDIDATES, language="en")
    assert choice == RouteChoice("task-flight", 0.7)


def test_an_unreachable_server_gives_none_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = OpenAICompatibleModel(
        f"http://127.0.0.1:{port}/v1", KEY, "m", timeout=0.5, retries=2, backoff=0.01
    )
    started = time.monotonic()
    assert unreachable.route("fly", CANDIDATES, language="en") is None
    assert unreachable.extract("...", SLOTS, language="en", today=TODAY) is None
    assert unreachable.summarize(["a"], language="en", max_words=10) is None
    assert unreachable.rephrase("Flight LH400 is booked.", language="en") == (
        "Flight LH400 is booked."
    )
    assert time.monotonic() - started < 5


# -- rephrase and summarize ------------------------------------------------------------------

REPLY = "Booked flight LH400 on 2027-01-22 for 2 passengers. Reference ORD-00042."


def test_rephrase_uses_a_rewording_that_keeps_every_number(server: ChatServer) -> None:
    better = "All set! LH400 on 2027-01-22, 2 passengers, booking reference ORD-00042."
    server.script(Reply(completion(better)))
    assert model(server).rephrase(REPLY, language="en") == better
    sent = server.last.body
    assert "response_format" not in sent
    assert sent["messages"][-1] == {"role": "user", "content": REPLY}


@pytest.mark.parametrize(
    "rewording",
    [
        "All set! LH400 on 2027-01-22 for two passengers. Reference ORD-00042.",  # drops 2
        "Booked LH400 on 22 January 2027 for 2. Reference ORD-00042.",  # drops 01 and 22
        "Booked LH400 on 2027-01-22 for 2 passengers. Reference ORD-42.",  # mangles an id
        "Booked LH400 on 2027-01-22 for 2 passengers at 09:30. Reference ORD-00042.",  # adds
        "   ",  # empty
        REPLY + " " + "Lovely weather for it. " * 20,  # too long
    ],
    ids=["drops-count", "drops-date", "mangles-id", "adds-time", "empty", "too-long"],
)
def test_rephrase_falls_back_to_the_reply_on_any_doubt(server: ChatServer, rewording: str) -> None:
    server.script(Reply(completion(rewording)))
    assert model(server).rephrase(REPLY, language="en") == REPLY


def test_rephrase_falls_back_on_refusals_and_errors(server: ChatServer) -> None:
    server.script(
        Reply(completion(None, refusal="no")),
        Reply({"error": {"message": "bad request"}}, status=400),
    )
    assert model(server).rephrase(REPLY, language="en") == REPLY
    assert model(server).rephrase(REPLY, language="en") == REPLY
    assert len(server.received) == 2


def test_summarize_returns_a_short_enough_summary_or_none(server: ChatServer) -> None:
    server.script(
        Reply(completion("User booked LH400 for 2027-01-22.")),
        Reply(completion("word " * 30)),
    )
    texts = ["I want to fly to Berlin", "Booked LH400 on 2027-01-22."]
    assert model(server).summarize(texts, language="en", max_words=20) == (
        "User booked LH400 for 2027-01-22."
    )
    assert "I want to fly to Berlin" in server.last.body["messages"][-1]["content"]
    assert model(server).summarize(texts, language="en", max_words=20) is None


def test_nothing_to_ask_sends_nothing(server: ChatServer) -> None:
    m = model(server)
    assert m.route("fly", [], language="en") is None
    assert m.extract("fly", [], language="en", today=TODAY) == {}
    assert m.summarize([], language="en", max_words=10) is None
    assert m.rephrase("", language="en") == ""
    assert server.received == []


# -- the offline default and configuration ---------------------------------------------------


def test_the_rule_model_declines_everything_and_keeps_replies() -> None:
    rules = RuleModel()
    assert isinstance(rules, Model)
    assert rules.route("fly", CANDIDATES, language="en") is None
    assert rules.extract("to Berlin", SLOTS, language="en", today=TODAY) is None
    assert rules.summarize(["a", "b"], language="en", max_words=10) is None
    assert rules.rephrase(REPLY, language="zh") == REPLY


def test_default_model_is_offline_unless_the_environment_configures_one() -> None:
    assert isinstance(default_model({}), RuleModel)
    assert isinstance(default_model({"RELAYSTATE_MODEL_BASE_URL": "http://x/v1"}), RuleModel)
    assert isinstance(default_model({"RELAYSTATE_MODEL_NAME": "m"}), RuleModel)
    configured = default_model(
        {
            "RELAYSTATE_MODEL_BASE_URL": "https://api.example.com/v1/",
            "RELAYSTATE_MODEL_NAME": "gpt-test",
            "RELAYSTATE_MODEL_API_KEY": KEY,
        }
    )
    assert isinstance(configured, OpenAICompatibleModel)
    assert isinstance(configured, Model)
    assert configured.base_url == "https://api.example.com/v1"
    assert configured.model == "gpt-test"
    assert KEY not in repr(configured)
    keyless = OpenAICompatibleModel.from_env(
        {"RELAYSTATE_MODEL_BASE_URL": "http://localhost:11434/v1", "RELAYSTATE_MODEL_NAME": "m"}
    )
    assert keyless is not None


def test_default_model_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAYSTATE_MODEL_BASE_URL", raising=False)
    monkeypatch.delenv("RELAYSTATE_MODEL_NAME", raising=False)
    assert isinstance(default_model(), RuleModel)
    monkeypatch.setenv("RELAYSTATE_MODEL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RELAYSTATE_MODEL_NAME", "m")
    assert isinstance(default_model(), OpenAICompatibleModel)


def test_a_malformed_configuration_fails_loudly() -> None:
    with pytest.raises(ValueError, match="base URL"):
        default_model(
            {"RELAYSTATE_MODEL_BASE_URL": "api.example.com", "RELAYSTATE_MODEL_NAME": "m"}
        )
    with pytest.raises(ValueError, match="api_key"):
        OpenAICompatibleModel(f"https://user:{KEY}@api.example.com/v1", None, "m")
    with pytest.raises(ValueError):
        OpenAICompatibleModel("http://x/v1", KEY, "m", timeout=0)
    with pytest.raises(ValueError):
        OpenAICompatibleModel("http://x/v1", KEY, " ")


def test_slot_specs_come_from_template_slots() -> None:
    cabin = Slot("cabin", choices=["economy", "business"], ask={"en": "Which cabin?"})
    assert SlotSpec.from_slot(cabin) == SlotSpec(
        "cabin", "choice", "Which cabin?", ("economy", "business")
    )
    assert SlotSpec("cabin", choices=["a"]).kind == "choice"
