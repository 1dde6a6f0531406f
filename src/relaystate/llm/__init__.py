"""Language models for understanding and phrasing; the deterministic engine decides.

``default_model()`` gives the model the environment configures (an OpenAI-compatible
endpoint, see ``OpenAICompatibleModel.from_env``) or, with none configured, the offline
``RuleModel``, which declines every question so the rules and templates do all the work.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .base import Model, RouteCandidate, RouteChoice, SlotSpec
from .env import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL
from .rules import RuleModel

if TYPE_CHECKING:
    from .openai import OpenAICompatibleModel


def default_model(environ: Mapping[str, str] | None = None) -> Model:
    """The configured OpenAI-compatible model, or the offline ``RuleModel`` if none is.

    ``environ`` defaults to ``os.environ``; a set but malformed base URL raises ValueError.
    The HTTP client is imported only when a model is configured.
    """
    env = os.environ if environ is None else environ
    if not env.get(ENV_BASE_URL, "").strip():
        return RuleModel()
    from .openai import OpenAICompatibleModel

    configured = OpenAICompatibleModel.from_env(env)
    return configured if configured is not None else RuleModel()


def __getattr__(name: str) -> Any:
    if name == "OpenAICompatibleModel":
        from .openai import OpenAICompatibleModel

        return OpenAICompatibleModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "Model",
    "OpenAICompatibleModel",
    "RouteCandidate",
    "RouteChoice",
    "RuleModel",
    "SlotSpec",
    "default_model",
]
