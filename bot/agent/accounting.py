"""The usage accountant: the one place a model call's tokens and cost are counted, in the
transcript (when the call is part of it), the session's counters (one atomic increment)
and the Prometheus metrics. Person turns, heartbeats, memory flushes and compaction's
summarizer calls all go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.agent.pricing import PriceList
from bot.types import Usage

if TYPE_CHECKING:
    from bot.agent.cache_breaks import CacheWatch
    from bot.metrics import Metrics
    from bot.store.base import Store
    from bot.transcript import Entry


class UsageAccountant:
    def __init__(
        self,
        *,
        store: Store,
        metrics: Metrics,
        prices: PriceList,
        clock: Callable[[], float],
        cache_watch: CacheWatch,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.prices = prices
        self.clock = clock
        self.cache_watch = cache_watch

    def _observe(self, usage: Usage, latency: float | None) -> None:
        if latency is not None:
            self.metrics.model_latency.observe(latency)
        for kind, value in usage.to_dict().items():
            if kind.endswith("_tokens"):  # searches are counted in the cost, not as tokens
                self.metrics.tokens.labels(kind.removesuffix("_tokens")).inc(value)

    async def record_reply(self, entry: Entry, usage: Usage, model: str, latency: float) -> None:
        """A call that is part of the conversation: its reply `entry` is appended and the
        session's counters, context size, model and last call time move with it, in one
        transaction."""
        self._observe(usage, latency)
        await self.store.record_model_call(
            entry,
            usage,
            context_tokens=usage.prompt_tokens + usage.output_tokens,
            cost_usd=self.prices.cost(model, usage),
            model=model,
        )

    async def charge(
        self,
        session_id: str,
        usage: Usage,
        model: str,
        *,
        latency: float | None = None,
        read_cache: bool,
        context_tokens: int | None = None,
    ) -> None:
        """A call outside the conversation (a flush, a summary): only the counters move.

        `read_cache` says whether it read the conversation's prompt cache (a flush does, so
        the cache's expiry moves; the summarizer's own prompts do not). `context_tokens`,
        when given, is the conversation's new size (after a compaction)."""
        self._observe(usage, latency)
        if context_tokens is not None:
            self.cache_watch.forget(session_id)  # rewritten on purpose: not a cache break
        await self.store.add_usage(
            session_id,
            usage,
            context_tokens=context_tokens,
            cost_usd=self.prices.cost(model, usage),
            at=self.clock() if read_cache else None,
        )
