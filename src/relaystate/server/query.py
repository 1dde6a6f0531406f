"""Unknown query parameters are refused (422), not ignored: ``?limt=5`` would otherwise
answer as if the caller had asked for nothing, and the schema says each operation takes
only the parameters it lists."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ..errors import InvalidInput

_TAKES: dict[int, frozenset[str]] = {}
"""A route's query parameter names, by ``id(route)`` (routes live as long as the app)."""


async def known_query(request: Request) -> None:
    """An app-wide dependency: every query parameter must be one the operation declares
    (async: it only reads the request, and a synchronous one would cost a thread hop)."""
    if not request.query_params:
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    takes = _TAKES.get(id(route))
    if takes is None:
        takes = _TAKES[id(route)] = frozenset(_names(dependant))
    unknown = [name for name in request.query_params if name not in takes]
    if unknown:
        listed = ", ".join(sorted(takes)) or "none"
        raise InvalidInput(
            unknown[0] or "(a parameter without a name)",
            f"is not a query parameter of this operation (it takes: {listed})",
        )


def _names(dependant: Any) -> set[str]:
    """The query parameter names of an operation and of every dependency it has."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _names(sub)
    return names
