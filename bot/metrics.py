"""Prometheus metrics for `/metrics`, in a registry of their own so tests can make many, and
the last hour of turns in memory for the console's overview (a histogram's buckets cannot
give a p95)."""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

WINDOW_SECONDS = 3600


@dataclass(frozen=True)
class TurnFigures:
    turns: int
    errors: int
    p50: float | None
    p95: float | None


class TurnWindow:
    """Each turn of the last hour: when it ended, how long it took, whether it failed."""

    def __init__(self) -> None:
        self._turns: deque[tuple[float, float, bool]] = deque()

    def record(self, at: float, seconds: float, *, failed: bool) -> None:
        self._turns.append((at, seconds, failed))
        self._drop_before(at - WINDOW_SECONDS)

    def figures(self, now: float) -> TurnFigures:
        self._drop_before(now - WINDOW_SECONDS)
        took = sorted(seconds for _, seconds, _ in self._turns)
        errors = sum(failed for *_, failed in self._turns)
        if len(took) < 2:
            only = took[0] if took else None
            return TurnFigures(len(took), errors, only, only)
        cuts = statistics.quantiles(took, n=20, method="inclusive")
        return TurnFigures(len(took), errors, statistics.median(took), cuts[18])

    def _drop_before(self, oldest: float) -> None:
        while self._turns and self._turns[0][0] < oldest:
            self._turns.popleft()


class Metrics:
    def __init__(self) -> None:
        self.started_at = time.time()
        self.recent_turns = TurnWindow()
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
        self.cost = Counter(
            "krill_cost_usd",
            "Estimated cost of model calls in US dollars, by what the call was for and channel",
            ["kind", "channel"],
            registry=r,
        )
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
        self.presses = Counter(
            "krill_button_presses",
            "Button presses, by what came of them (done, already, expired, not_yours)",
            ["channel", "result"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
