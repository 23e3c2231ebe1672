"""Estimated cost of model usage in US dollars, from list prices per million tokens.

Prices are estimates for `/status`; the provider's invoice is the truth.
"""

from __future__ import annotations

from bot.context.cache_cost import CACHE_READ_MULTIPLIER, CACHE_WRITE_MULTIPLIER
from bot.types import Usage

# (input, output) dollars per million tokens, matched by model-id prefix, longest first.
PRICES: dict[str, tuple[float, float]] = {
    "claude-fable-5": (10.0, 50.0),
    "claude-opus-5": (4.0, 20.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-haiku-5": (1.0, 5.0),
    "claude-haiku-4": (1.0, 5.0),
}
DEFAULT_PRICE = (3.0, 15.0)
# Server-side web search, dollars per 1,000 searches, on top of the tokens its results add.
WEB_SEARCH_USD_PER_1000 = 10.0


def price_for(model: str) -> tuple[float, float]:
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix]
    return DEFAULT_PRICE


def estimate_cost(model: str, usage: Usage, cache_ttl: str = "5m") -> float:
    input_price, output_price = price_for(model)
    dollars_per_token = input_price / 1_000_000
    return (
        usage.input_tokens * dollars_per_token
        + usage.cache_write_tokens * dollars_per_token * CACHE_WRITE_MULTIPLIER.get(cache_ttl, 1.25)
        + usage.cache_read_tokens * dollars_per_token * CACHE_READ_MULTIPLIER
        + usage.output_tokens * output_price / 1_000_000
        + usage.web_search_requests * WEB_SEARCH_USD_PER_1000 / 1_000
    )
