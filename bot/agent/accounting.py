"""The usage accountant: the one place a model call's tokens and cost are counted, in the
transcript (when the call is part of it), the session's counters (one atomic increment)
and the Prometheus metrics, each call tagged with what it was for (`CostKind`) and whom it
is charged to (`Payer`). Person turns, heartbeats, reminders, memory flushes, compaction's
summarizer calls and a fresh session's carry-over note all go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.agent.pricing import PriceList
from bot.spending.caps import payer_for, sums_of
from bot.spending.periods import day_of
from bot.store.costs import CostLine
from bot.types import CostKind, Payer, Usage

if TYPE_CHECKING:
    from bot.agent.cache_breaks import CacheWatch
    from bot.config import Config
    from bot.metrics import Metrics
    from bot.store.base import SessionRow, Store
    from bot.transcript import Entry


class UsageAccountant:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        metrics: Metrics,
        prices: PriceList,
        clock: Callable[[], float],
        cache_watch: CacheWatch,
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self.prices = prices
        self.clock = clock
        self.cache_watch = cache_watch
        self.zone = ZoneInfo(config.agent.timezone)  # where the ledger's days turn over

    def _line(self, usage: Usage, model: str, kind: CostKind, payer: Payer) -> CostLine:
        """The ledger's row for a call: priced, dated and with the sums it adds to."""
        at = self.clock()
        return CostLine(
            at=at,
            day=day_of(at, self.zone),
            kind=kind,
            payer=payer,
            model=model,
            cost_usd=self.prices.cost(model, usage),
            sums=sums_of(payer, at, self.zone),
        )

    def _observe(self, usage: Usage, latency: float | None, line: CostLine) -> None:
        if latency is not None:
            self.metrics.model_latency.observe(latency)
        for name, value in usage.to_dict().items():
            if name.endswith("_tokens"):  # searches are counted in the cost, not as tokens
                self.metrics.tokens.labels(name.removesuffix("_tokens")).inc(value)
        self.metrics.cost.labels(line.kind, line.payer.channel or "unknown").inc(line.cost_usd)

    async def record_reply(
        self,
        entry: Entry,
        usage: Usage,
        model: str,
        latency: float,
        *,
        kind: CostKind,
        payer: Payer,
    ) -> None:
        """A call that is part of the conversation: its reply `entry` is appended and the
        session's counters, context size, model and last call time move with it, in one
        transaction."""
        line = self._line(usage, model, kind, payer)
        self._observe(usage, latency, line)
        await self.store.record_model_call(
            entry,
            usage,
            context_tokens=usage.prompt_tokens + usage.output_tokens,
            cost=line,
            model=model,
        )

    async def charge(
        self,
        session: SessionRow,
        usage: Usage,
        model: str,
        *,
        kind: CostKind,
        latency: float | None = None,
        read_cache: bool,
        context_tokens: int | None = None,
    ) -> None:
        """A call outside the conversation (a flush, a summary): only the counters move,
        charged to the session's person (in a direct chat) or chat.

        `read_cache` says whether it read the conversation's prompt cache (a flush does, so
        the cache's expiry moves; the summarizer's own prompts do not). `context_tokens`,
        when given, is the conversation's new size (after a compaction)."""
        payer = payer_for(self.config, session_id=session.session_id, origin=session.origin)
        line = self._line(usage, model, kind, payer)
        self._observe(usage, latency, line)
        if context_tokens is not None:
            self.cache_watch.forget(session.session_id)  # rewritten on purpose: not a break
        await self.store.add_usage(
            session.session_id,
            usage,
            context_tokens=context_tokens,
            cost=line,
            at=line.at if read_cache else None,
        )
