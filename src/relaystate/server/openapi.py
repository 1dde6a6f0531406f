"""The app's OpenAPI document, made to say what the server enforces.

pydantic writes a dict whose keys are constrained (``dict[PlainText, ...]``) as
``patternProperties`` alone, which in JSON Schema still admits any other key; the server
refuses such keys, so every such object is closed with ``additionalProperties: false``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi


def install(app: FastAPI) -> None:
    """Serve the corrected document (made once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = close_pattern_objects(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def close_pattern_objects(node: Any) -> Any:
    """Every object schema with ``patternProperties`` and no ``additionalProperties`` gets
    ``additionalProperties: false`` (in place; returns ``node``)."""
    if isinstance(node, dict):
        if "patternProperties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            close_pattern_objects(value)
    elif isinstance(node, list):
        for value in node:
            close_pattern_objects(value)
    return node
