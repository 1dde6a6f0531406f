"""Types of request bodies that the schema states exactly as the server checks them."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints
from typing_extensions import TypeAliasType

PlainText = Annotated[str, StringConstraints(pattern=r"^[^\x00]*$")]
"""Text with no NUL character (no backend stores one)."""
JsonData = TypeAliasType(
    "JsonData",
    "bool | int | float | PlainText | list[JsonData] | dict[PlainText, JsonData] | None",
)
"""JSON whose text holds no NUL, as the schema states it."""
