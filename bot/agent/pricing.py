"""Estimated cost of model usage in US dollars, from list prices per million tokens: the one
price table. Claude's prices are known here; `[models."<id>"]` sets (or overrides) a model's
prices, which is how models of other providers get theirs. A model with no known price is
estimated at Sonnet's, so a forgotten price over-states a cost rather than hiding it.

Prices are estimates for `/status` and the console; the provider's invoice is the truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.config import Config, ModelConfig
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


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Dollars per million tokens."""

    input: float
    output: float
    cached_input: float
    known: bool  # False: nobody said, DEFAULT_PRICE stands in


def known_price(model: str) -> tuple[float, float] | None:
    for prefix in sorted(PRICES, key=len, reverse=True):
        if model.startswith(prefix):
            return PRICES[prefix]
    return None


def model_price(model: str, own: ModelConfig | None = None) -> ModelPrice:
    """The price of `model`: its [models] table's keys first, then the known list price."""
    own = own or ModelConfig()
    known = known_price(model)
    base_in, base_out = known or DEFAULT_PRICE
    price_in = base_in if own.input_usd_per_mtok is None else own.input_usd_per_mtok
    price_out = base_out if own.output_usd_per_mtok is None else own.output_usd_per_mtok
    cached = own.cached_input_usd_per_mtok
    return ModelPrice(
        price_in,
        price_out,
        price_in * CACHE_READ_MULTIPLIER if cached is None else cached,
        known=known is not None
        or (own.input_usd_per_mtok is not None and own.output_usd_per_mtok is not None),
    )


def estimate_cost(
    model: str, usage: Usage, cache_ttl: str = "5m", own: ModelConfig | None = None
) -> float:
    price = model_price(model, own)
    per_token = price.input / 1_000_000
    return (
        usage.input_tokens * per_token
        # Only Anthropic reports cache writes; providers that cache by themselves bill none.
        + usage.cache_write_tokens * per_token * CACHE_WRITE_MULTIPLIER.get(cache_ttl, 1.25)
        + usage.cache_read_tokens * price.cached_input / 1_000_000
        + usage.output_tokens * price.output / 1_000_000
        + usage.web_search_requests * WEB_SEARCH_USD_PER_1000 / 1_000
    )


class PriceList:
    """The price table as the service uses it: the config's [models] prices over the known
    ones, and the cache TTL bought. `price` says what a model costs per million tokens (and
    whether anybody said), `cost` what one call's usage cost."""

    def __init__(self, models: Mapping[str, ModelConfig], cache_ttl: str) -> None:
        self.models = models
        self.cache_ttl = cache_ttl

    @classmethod
    def of(cls, config: Config) -> PriceList:
        return cls(config.models, config.anthropic.cache_ttl)

    def price(self, model: str) -> ModelPrice:
        return model_price(model, self.models.get(model))

    def cost(self, model: str, usage: Usage) -> float:
        return estimate_cost(model, usage, self.cache_ttl, self.models.get(model))
