"""The short specs that name a model in a setting (``--embedder``, ``--reranker``,
``--rewriter``, ``--extractor`` and their environment variables), read one way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class Spec:
    """A spec as written: ``FAMILY[:REST]``, and the setting it came from (for messages)."""

    text: str
    setting: str

    @property
    def family(self) -> str:
        return self.text.partition(":")[0].lower()

    @property
    def rest(self) -> str:
        return self.text.partition(":")[2]

    def model_at(self) -> tuple[str, str]:
        """``MODEL@BASE_URL`` after the family, or :class:`ConfigError` saying how to write it."""
        model, at, base_url = self.rest.partition("@")
        if not model.strip() or not at or not base_url.strip():
            raise ConfigError(
                f"{self.setting}: write {self.family}:MODEL@BASE_URL, not {self.text!r}"
            )
        return model, base_url


def read_spec(
    spec: str | None, environ: Mapping[str, str], variable: str, *, kind: str
) -> Spec | None:
    """The spec given, else the one in ``variable``; None for none (unset, empty, ``none``).
    ``kind`` names the setting in messages (``reranker spec``)."""
    setting = f"{kind} spec" if spec is not None else variable
    text = (spec if spec is not None else environ.get(variable, "")).strip()
    if not text or text.lower() == "none":
        return None
    return Spec(text, setting)
