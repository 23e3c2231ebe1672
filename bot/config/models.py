"""Per-model settings (`[models."<model id>"]`): what a model can take and give, with known
defaults for the Claude models Krill lists, so a session switched by `/model` works with
its own model's limits instead of one window for every model.

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
    # List prices in US dollars per million tokens (bot.agent.pricing knows Claude's);
    # cached input defaults to a tenth of the input price, as Anthropic and most others bill.
    input_usd_per_mtok: float | None = Field(None, ge=0)
    output_usd_per_mtok: float | None = Field(None, ge=0)
    cached_input_usd_per_mtok: float | None = Field(None, ge=0)
    # False for a text-only model: images reach it as a note saying it cannot see them.
    images: bool = True


@dataclass(frozen=True, slots=True)
class KnownModel:
    context_window: int
    max_output_tokens: int


# What the provider documents per model family, matched by model-id prefix, longest first.
# The 1M window is native from the 4.6 generation on.
KNOWN_MODELS: dict[str, KnownModel] = {
    "claude-fable-5": KnownModel(1_000_000, 128_000),
    "claude-opus-5": KnownModel(1_000_000, 128_000),
    "claude-sonnet-5": KnownModel(1_000_000, 128_000),
    "claude-haiku-5": KnownModel(1_000_000, 128_000),
    "claude-opus-4-8": KnownModel(1_000_000, 128_000),
    "claude-opus-4-7": KnownModel(1_000_000, 128_000),
    "claude-opus-4-6": KnownModel(1_000_000, 128_000),
    "claude-sonnet-4-6": KnownModel(1_000_000, 64_000),
    "claude-opus-4-5": KnownModel(200_000, 64_000),
    "claude-opus-4": KnownModel(200_000, 32_000),
    "claude-sonnet-4": KnownModel(200_000, 64_000),
    "claude-haiku-4": KnownModel(200_000, 64_000),
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
