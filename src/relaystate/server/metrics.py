"""What the server counts, for Prometheus at ``/metrics``: requests by route and status,
turns and their latency, actions by the status a turn left them in, version conflicts,
recovery passes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class Metrics:
    """One registry per app (tests build many apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "relaystate_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "relaystate_http_request_seconds",
            "HTTP request latency by route template",
            ["route"],
            registry=self.registry,
        )
        self.turns = Counter(
            "relaystate_turns", "Conversational turns committed", registry=self.registry
        )
        self.turn_latency = Histogram(
            "relaystate_turn_seconds",
            "Latency of one conversational turn (read, decide, commit, actions)",
            registry=self.registry,
        )
        self.actions = Counter(
            "relaystate_actions",
            "Actions created or moved by turns, by the status they were left in",
            ["status"],
            registry=self.registry,
        )
        self.conflicts = Counter(
            "relaystate_conflicts",
            "Requests refused because a task or session changed meanwhile, by kind",
            ["kind"],
            registry=self.registry,
        )
        self.recovered = Counter(
            "relaystate_recovered_tasks",
            "Tasks resumed by recovery passes, by the status they ended in",
            ["status"],
            registry=self.registry,
        )
