"""Language models for understanding and phrasing; the deterministic engine decides.

``default_model()`` gives the model the environment configures (an OpenAI-compatible
endpoint, see ``OpenAICompatibleModel.from_env``) or, with none configured, the offline
``RuleModel``, which declines every question so the rules and templates do all the work.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import Model, RouteCandidate, RouteChoice, SlotSpec
from .openai import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, OpenAICompatibleModel
from .rules import RuleModel


def default_model(environ: Mapping[str, str] | None = None) -> Model:
    """The configured OpenAI-compatible model, or the offline ``RuleModel`` if none is.

    ``environ`` defaults to ``os.environ``; a set but malformed base URL raises ValueError.
    """
    configured = OpenAICompatibleModel.from_env(environ)
    return configured if configured is not None else RuleModel()


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
