"""The HTTP server: the ``/v1`` API with per-user keys, health and metrics, and the
dashboard. Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client)."""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
