"""Prometheus metrics for `/metrics`, in a registry of their own so tests can make many."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.messages_in = Counter(
            "krill_messages_in", "Messages accepted from people", ["channel"], registry=r
        )
        self.messages_out = Counter(
            "krill_messages_out", "Reply chunks delivered", ["channel"], registry=r
        )
        self.turns = Counter("krill_turns", "Agent turns run", ["kind", "outcome"], registry=r)
        self.model_latency = Histogram(
            "krill_model_latency_seconds",
            "Model call latency",
            buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160),
            registry=r,
        )
        self.tokens = Counter("krill_tokens", "Model tokens by kind", ["kind"], registry=r)
        # Per provider and model id (as the config names it): every request sent, every one
        # that failed (by kind), and every move to the next of agent.fallback_models.
        self.model_calls = Counter(
            "krill_model_calls", "Model requests sent", ["provider", "model"], registry=r
        )
        self.model_failures = Counter(
            "krill_model_failures",
            "Model requests that failed, by kind",
            ["provider", "model", "kind"],
            registry=r,
        )
        self.model_fallbacks = Counter(
            "krill_model_fallbacks",
            "Calls that moved from this model to the next fallback model",
            ["provider", "model", "to"],
            registry=r,
        )
        self.errors = Counter("krill_errors", "Errors by type", ["type"], registry=r)
        self.cache_breaks = Counter(
            "krill_cache_breaks",
            "Requests that read much less from a warm prompt cache than the previous one left,"
            " by the first block that differed",
            ["block"],
            registry=r,
        )
        self.compaction_failures = Counter(
            "krill_compaction_failures",
            "Compactions that failed (the summarizer's error) or ran past their deadline",
            ["cause"],
            registry=r,
        )
        self.queue_depth = Gauge("krill_queue_depth", "Messages waiting or running", registry=r)
        self.outbox_dead = Counter(
            "krill_outbox_dead",
            "Reply chunks the platform refused for good",
            ["channel"],
            registry=r,
        )
        self.outbox_maybe_sent = Counter(
            "krill_outbox_maybe_sent",
            "Reply chunks sent but never confirmed, set aside rather than sent again",
            ["channel"],
            registry=r,
        )
        self.outbox_pending = Gauge(
            "krill_outbox_pending", "Reply chunks waiting to be delivered", registry=r
        )
        self.inbound_results = Counter(
            "krill_inbound", "What happened to inbound messages", ["channel", "result"], registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
