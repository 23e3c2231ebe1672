"""Per-model settings (`[models."<model id>"]`): what a model can take and give and what it
costs, with known defaults for the Claude models Krill lists, so a session switched by
`/model` works with its own model's limits instead of one window for every model. This is
the one price table: per-model list prices, and the prompt cache's and web search's
charges, which every cost estimate and the warm-compaction decision read.

A model's window is the most Krill puts in one request for it: its own `context_window`
when configured, else the smaller of `agent.context_window` (the ceiling Krill works with
by default, a cost choice) and the model's known window (what it can take at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from bot.config.sections import Section


class ModelConfig(Section):
    """One `[models."<model id>"]` table; a key left out takes the known default."""

    context_window: int | None = Field(None, gt=1000)
    max_output_tokens: int | None = Field(None, gt=0)
    # List prices in US dollars per million tokens; required for a model Krill does not know.
    input_usd_per_mtok: float | None = Field(None, ge=0)
    output_usd_per_mtok: float | None = Field(None, ge=0)


# What the prompt cache charges, as multipliers on the input price (the provider's list
# prices, the same for every Claude model), and server-side web search, in dollars per
# 1,000 searches on top of the tokens its results add.
CACHE_READ_MULTIPLIER = 0.1
CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
WEB_SEARCH_USD_PER_1000 = 10.0


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """A model's list prices, US dollars per million tokens."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float

    @property
    def output_ratio(self) -> float:
        """How many input tokens one output token costs as much as."""
        return (
            self.output_usd_per_mtok / self.input_usd_per_mtok if self.input_usd_per_mtok else 1.0
        )


@dataclass(frozen=True, slots=True)
class KnownModel:
    context_window: int
    max_output_tokens: int
    prices: ModelPrices


def _known(window: int, output: int, input_usd: float, output_usd: float) -> KnownModel:
    return KnownModel(window, output, ModelPrices(input_usd, output_usd))


# What the provider documents per model family, matched by model-id prefix, longest first:
# window, output limit, and list prices per million input and output tokens. The 1M window
# is native from the 4.6 generation on.
KNOWN_MODELS: dict[str, KnownModel] = {
    "claude-fable-5": _known(1_000_000, 128_000, 10.0, 50.0),
    "claude-opus-5": _known(1_000_000, 128_000, 4.0, 20.0),
    "claude-sonnet-5": _known(1_000_000, 128_000, 2.0, 10.0),
    "claude-haiku-5": _known(1_000_000, 128_000, 1.0, 5.0),
    "claude-opus-4-8": _known(1_000_000, 128_000, 5.0, 25.0),
    "claude-opus-4-7": _known(1_000_000, 128_000, 5.0, 25.0),
    "claude-opus-4-6": _known(1_000_000, 128_000, 5.0, 25.0),
    "claude-sonnet-4-6": _known(1_000_000, 64_000, 3.0, 15.0),
    "claude-opus-4-5": _known(200_000, 64_000, 5.0, 25.0),
    "claude-opus-4": _known(200_000, 32_000, 15.0, 75.0),
    "claude-sonnet-4": _known(200_000, 64_000, 3.0, 15.0),
    "claude-haiku-4": _known(200_000, 64_000, 1.0, 5.0),
}


def known_model(model: str) -> KnownModel | None:
    for prefix in sorted(KNOWN_MODELS, key=len, reverse=True):
        if model.startswith(prefix):
            return KNOWN_MODELS[prefix]
    return None


class WindowSource(StrEnum):
    MODEL = "model"  # the model's own limit (its [models] table, or its known window)
    LEARNED = "learned"  # the provider named a smaller one in a "prompt is too long" error
    CONFIG = "config"  # agent.context_window


@dataclass(frozen=True, slots=True)
class ModelLimits:
    context_window: int
    window_source: WindowSource
    max_output_tokens: int | None  # None: nothing known beyond agent.max_tokens


def model_limits(models: dict[str, ModelConfig], model: str, *, ceiling: int) -> ModelLimits:
    """The limits of `model`: its [models] table first, then what is known of it, with
    `ceiling` (agent.context_window) capping a window the table does not set."""
    own = models.get(model, ModelConfig())
    known = known_model(model)
    max_output = own.max_output_tokens or (known.max_output_tokens if known else None)
    if own.context_window is not None:
        return ModelLimits(own.context_window, WindowSource.MODEL, max_output)
    if known is not None and known.context_window < ceiling:
        return ModelLimits(known.context_window, WindowSource.MODEL, max_output)
    return ModelLimits(ceiling, WindowSource.CONFIG, max_output)


def model_prices(models: dict[str, ModelConfig], model: str) -> ModelPrices | None:
    """The list prices of `model`: its [models] table's, a key left out taking the known
    price; None when a price is neither configured nor known."""
    own = models.get(model, ModelConfig())
    known = known_model(model)
    input_usd = own.input_usd_per_mtok
    output_usd = own.output_usd_per_mtok
    if known is not None:
        input_usd = known.prices.input_usd_per_mtok if input_usd is None else input_usd
        output_usd = known.prices.output_usd_per_mtok if output_usd is None else output_usd
    if input_usd is None or output_usd is None:
        return None
    return ModelPrices(input_usd, output_usd)


def unpriced_models(models: dict[str, ModelConfig], wanted: list[str]) -> list[str]:
    """One "what to set" line per model of `wanted` Krill cannot price."""
    return [
        f'models."{model}": Krill has no price for this model; set input_usd_per_mtok and '
        "output_usd_per_mtok (US dollars per million tokens) in its table"
        for model in dict.fromkeys(wanted)
        if model_prices(models, model) is None
    ]
