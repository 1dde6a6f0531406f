"""The environment variables that configure a hosted model (none set: rules only)."""

ENV_BASE_URL = "RELAYSTATE_MODEL_BASE_URL"
"""An OpenAI-compatible endpoint, e.g. ``https://api.openai.com/v1``."""
ENV_API_KEY = "RELAYSTATE_MODEL_API_KEY"
"""Its API key, if it needs one."""
ENV_MODEL = "RELAYSTATE_MODEL_NAME"
"""The model to ask, e.g. ``gpt-4o-mini``."""
