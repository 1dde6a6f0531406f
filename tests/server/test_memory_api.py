"""``/v1/memory``: a user's long-term memory over HTTP, through the real app over a real
SQLite file: added, embedded in the background, searched by words and by vectors, filtered;
bad input is a 4xx with nothing written; one user never reaches another's memory."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate.memory.embed import HashEmbedder

from .test_api import Api, error

NOTES = [
    {"id": "n1", "text": "My seat preference is the window", "time": "2026-03-01T09:00:00Z"},
    {"id": "n2", "text": "The hotel in Kyoto has a garden", "source": "doc"},
    {"id": "n3", "text": "我的护照六月到期", "time": "2026-04-01T09:00:00+00:00"},
]


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    made = Api(tmp_path, embedder=HashEmbedder(dimension=256))
    yield made
    made.rt.close()


def search(api: Api, who: str, ns: str, q: str, **params: object) -> list[str]:
    found = api.ok(who, "GET", f"/v1/memory/{ns}/search", params={"q": q, **params})
    return [h["id"] for h in found["hits"]]


def test_items_are_added_found_and_read_back(api: Api) -> None:
    assert api.ok("alice", "POST", "/v1/memory/notes/items", json={"items": NOTES}) == {
        "added": 3,
        "total": 3,
    }
    found = api.ok("alice", "GET", "/v1/memory/notes/search", params={"q": "window seat"})
    assert found["embedder"] == "hash:v2:256"  # whose vectors were compared
    keyword = {"q": "window seat", "mode": "keyword"}
    assert api.ok("alice", "GET", "/v1/memory/notes/search", params=keyword)["embedder"] is None
    hit = found["hits"][0]
    assert hit["id"] == "n1" and hit["text"] == NOTES[0]["text"] and "keyword" in hit["ranks"]
    assert hit["time"] == "2026-03-01T09:00:00+00:00" and hit["score"] > 0
    assert search(api, "alice", "notes", "护照")[0] == "n3"
    assert search(api, "alice", "notes", "护照", mode="keyword") == ["n3"]
    item = api.ok("alice", "GET", "/v1/memory/notes/items/n2")["item"]
    assert (item["source"], item["namespace"]) == ("doc", "notes")
    # filters reach both lists: hybrid search finds only what they admit
    assert search(api, "alice", "notes", "seat garden 护照", source="doc") == ["n2"]
    later = search(api, "alice", "notes", "seat garden 护照", since="2026-03-15T00:00:00Z")
    assert later == ["n3"]


def test_vectors_are_made_in_the_background(api: Api) -> None:
    api.ok("alice", "POST", "/v1/memory/notes/items", json={"items": NOTES})
    deadline = time.monotonic() + 10
    while not search(api, "alice", "notes", "windw seeat", mode="vector", k=1):
        assert time.monotonic() < deadline, "the items were never embedded"
        time.sleep(0.05)
    assert search(api, "alice", "notes", "windw seeat", mode="vector", k=1) == ["n1"]
    assert search(api, "alice", "notes", "windw seeat", mode="keyword") == []


def test_one_user_never_reaches_another_users_memory(api: Api) -> None:
    api.ok("alice", "POST", "/v1/memory/notes/items", json={"items": NOTES})
    api.ok("bob", "POST", "/v1/memory/notes/items", json={"items": [{"id": "n1", "text": "bob"}]})
    # vector search always offers the nearest items; bob's nearest are his own
    assert search(api, "bob", "notes", "window seat garden") == ["n1"]
    assert search(api, "bob", "notes", "window seat garden", mode="keyword") == []
    assert api.ok("bob", "GET", "/v1/memory/notes/items/n1")["item"]["text"] == "bob"
    error(api.call("bob", "GET", "/v1/memory/notes/items/n2"), 404, "not_found")
    assert api.ok("alice", "GET", "/v1/memory/notes/items/n1")["item"]["text"] == NOTES[0]["text"]
    # an admin key is a user too: it reaches its own memory, not everyone's
    assert search(api, "ops", "notes", "window") == []
    assert search(api, "alice", "notes", "window", mode="keyword") == ["n1"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"items": []}, 422),
        ({"items": [{"id": "a", "text": "x", "colour": "red"}]}, 422),
        ({"items": [{"id": "a\nb", "text": "x"}]}, 422),
        ({"items": [{"id": "a", "text": ""}]}, 422),
        ({"items": [{"id": "a", "text": "nul \u0000"}]}, 422),
        ({"items": [{"id": "a", "text": "x", "time": "yesterday"}]}, 422),
        ({"items": [{"id": "a", "text": "x", "metadata": [1]}]}, 422),
        ({"items": [{"id": f"i{i}", "text": "x"} for i in range(1001)]}, 422),
        ({"items": [{"id": "ok", "text": "fine"}, {"id": 5, "text": "x"}]}, 422),
    ],
)
def test_bad_items_are_refused_and_nothing_is_written(
    api: Api, body: dict[str, object], status: int
) -> None:
    answer = api.call("alice", "POST", "/v1/memory/notes/items", json=body)
    error(answer, status, "invalid_input")
    assert search(api, "alice", "notes", "fine x") == []
    assert api.ok("alice", "POST", "/v1/memory/notes/items", json={"items": NOTES})["total"] == 3


def test_bad_searches_are_4xx(api: Api) -> None:
    for params in (
        {},
        {"q": ""},
        {"q": "x", "k": 0},
        {"q": "x", "k": 5000},
        {"q": "x", "mode": "fuzzy"},
    ):
        error(
            api.call("alice", "GET", "/v1/memory/notes/search", params=params), 422, "invalid_input"
        )
    error(
        api.call("alice", "GET", "/v1/memory/bad%0Ans/search", params={"q": "x"}),
        422,
        "invalid_input",
    )
    said = error(
        api.call("alice", "GET", "/v1/memory/ends%20/search", params={"q": "x"}),
        422,
        "invalid_input",
    )
    assert said.startswith("path.namespace: is no valid id") and len(said) < 200, said
    error(api.call(None, "GET", "/v1/memory/notes/search", params={"q": "x"}), 401, "unauthorized")


def test_a_tasks_context_from_its_memory_within_a_budget(api: Api) -> None:
    for text in ("book a flight from Beijing to Shanghai", "Dec 9, economy, for Alice Wang"):
        turn = api.ok("alice", "POST", "/v1/sessions/s1/messages", json={"text": text})["turn"]
    task_id = turn["task"]["id"]
    built = api.ok("alice", "GET", f"/v1/tasks/{task_id}/context", params={"budget": 300})
    assert built["tokens"] <= built["budget"] == 300
    assert built["prompt"].startswith("Task state:") and "destination: Shanghai" in built["prompt"]
    assert built["query"] == "Dec 9, economy, for Alice Wang"
    layers = {d["layer"] for d in built["explanation"]}
    assert {"task", "entity", "recent"} <= layers
    assert all(d["reason"].startswith(("kept", "dropped")) for d in built["explanation"])
    asked = api.ok("alice", "GET", f"/v1/tasks/{task_id}/context", params={"q": "economy"})
    assert asked["query"] == "economy" and asked["budget"] == int(8192 * 0.8)
    error(api.call("bob", "GET", f"/v1/tasks/{task_id}/context"), 404, "not_found")
    assert api.ok("ops", "GET", f"/v1/tasks/{task_id}/context")["tokens"] > 0  # admin reads
    both = api.ok(
        "alice", "GET", f"/v1/tasks/{task_id}/context", params={"budget": 200, "window": 9999}
    )
    assert both["budget"] == 200  # a budget in tokens overrides the window
    for params in ({"budget": 5}, {"window": "big"}, {"q": "nul \u0000"}):
        answer = api.call("alice", "GET", f"/v1/tasks/{task_id}/context", params=params)
        error(answer, 422, "invalid_input")


@pytest.mark.parametrize("field", ["source", "task_id"])
def test_a_nul_in_a_search_filter_is_refused_alike_on_every_sql_backend(
    sql_store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """PostgreSQL cannot compare a NUL (psycopg raises DataError: a 500); SQLite could, and
    found nothing. Both refuse it as the other text fields are refused: 422, nothing read."""
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    api = Api(tmp_path, store=sql_store_url)
    try:
        api.ok("alice", "POST", "/v1/memory/notes/items", json={"items": NOTES})
        for values in (["doc\x00"], ["doc", "\x00"]):
            said = error(
                api.call(
                    "alice", "GET", "/v1/memory/notes/search", params={"q": "garden", field: values}
                ),
                422,
                "invalid_input",
            )
            assert said.startswith(f"query.{field}"), said
        assert search(api, "alice", "notes", "garden", source="doc", mode="keyword") == ["n2"]
    finally:
        api.rt.close()
