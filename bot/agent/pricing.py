"""Estimated cost of model usage in US dollars, from the price table in the config
(`bot/config/models.py`: list prices per model, the cache's and web search's charges).

Prices are estimates for `/status`, the caps and the costs table; the provider's invoice is
the truth.
"""

from __future__ import annotations

from bot.config import (
    CACHE_READ_MULTIPLIER,
    CACHE_WRITE_MULTIPLIER,
    WEB_SEARCH_USD_PER_1000,
    Config,
    ModelPrices,
)
from bot.types import Usage

PER_MTOK = 1_000_000


def usage_cost(prices: ModelPrices, usage: Usage, cache_ttl: str) -> float:
    """What `usage` costs at `prices`, its cache writes at the `cache_ttl` ("5m" or "1h")
    that was bought."""
    per_input = prices.input_usd_per_mtok / PER_MTOK
    return (
        usage.input_tokens * per_input
        + usage.cache_write_tokens * per_input * CACHE_WRITE_MULTIPLIER[cache_ttl]
        + usage.cache_read_tokens * per_input * CACHE_READ_MULTIPLIER
        + usage.output_tokens * prices.output_usd_per_mtok / PER_MTOK
        + usage.web_search_requests * WEB_SEARCH_USD_PER_1000 / 1_000
    )


class Pricing:
    """What a model call costs under one config (its price table and `anthropic.cache_ttl`)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def cost(self, model: str, usage: Usage) -> float:
        return usage_cost(self.config.model_prices(model), usage, self.config.anthropic.cache_ttl)
