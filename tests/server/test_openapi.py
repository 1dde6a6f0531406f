"""``/openapi.json`` describes every field the API answers with: each operation's success
answer is a record of named, typed, described fields, down to the leaves; free JSON stands
only where a user or a template chooses the value (slot values, an Action's input and
output, metadata), named as such."""

from __future__ import annotations

from typing import Any

from relaystate import Runtime, open_store
from relaystate.server import create_app

FREE_JSON = {
    "slots",
    "context",
    "input",
    "output",
    "state",
    "metadata",
    "before",
    "after",
    "processes",
    "ranks",
    "titles",
    "statuses",
    "action_statuses",
    "stages",
}
"""Fields whose values are chosen by users or templates: maps or plain JSON by design."""


def spec() -> dict[str, Any]:
    return create_app(Runtime(open_store("memory://"), []), recover_on_start=False).openapi()


def resolve(node: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = document["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def untyped(
    node: dict[str, Any], document: dict[str, Any], where: str, seen: set[str]
) -> list[str]:
    """Where a schema has an object of no named fields, or a field with no description."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
    node = resolve(node, document)
    found: list[str] = []
    for option in node.get("anyOf", []):
        found += untyped(option, document, where, seen)
    if node.get("type") == "array":
        found += untyped(node.get("items", {}), document, f"{where}[]", seen)
    if node.get("type") == "object" or "properties" in node:
        props = node.get("properties")
        if not props:
            found.append(f"{where}: an object with no named fields")
        for name, field in (props or {}).items():
            if name in FREE_JSON:
                continue
            if "description" not in field and "$ref" not in field:
                found.append(f"{where}.{name}: no description")
            found += untyped(field, document, f"{where}.{name}", seen)
    return found


def test_every_answer_is_a_typed_record() -> None:
    document = spec()
    problems: list[str] = []
    operations = 0
    for path, methods in document["paths"].items():
        if not path.startswith("/v1"):
            continue
        for method, op in methods.items():
            ok = op["responses"].get("200") or op["responses"].get("201")
            content = (ok or {}).get("content", {})
            if "text/event-stream" in content:
                continue  # each event is a TaskWithActions (documented in the description)
            schema = content.get("application/json", {}).get("schema", {})
            assert schema, f"{method.upper()} {path}: no JSON answer documented"
            operations += 1
            problems += untyped(schema, document, f"{method.upper()} {path}", set())
    assert operations >= 25
    assert problems == []


def test_the_records_a_client_needs_are_named() -> None:
    names = set(spec()["components"]["schemas"])
    wanted = {
        "Task",
        "TaskWithActions",
        "Action",
        "Turn",
        "Session",
        "Message",
        "JournalEntry",
        "Snapshot",
        "ErrorOut",
        "Build",
        "Worker",
        "Hit",
        "MemoryItem",
    }
    assert wanted <= names
