"""The model client: every model call of the service goes through here. It sends the request
to the provider its model id names (`bot.providers`), with the prompt cache's breakpoints,
retries failures worth retrying, and moves to the next of `agent.fallback_models` when a
model is overloaded, rate-limited for long, failing or unreachable.

A model that failed that way cools down for `agent.fallback_cooldown_seconds`: until then
calls start at the next model of the chain, then the model is tried first again. The
cool-down is kept in the store's shared state, so every replica skips a model one of them
found overloaded instead of each paying a failed request to learn it.

The agent loop drives the fallback of a turn itself (`serving`, `call`, `next_model`), so
it can re-shape the request for the next model's window; summaries and the fresh-session
note call `complete`, which does all of it at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam

from bot.agent.caching import apply_breakpoints
from bot.config import Config, ProviderKind, split_model_id
from bot.errors import (
    ModelAuthError,
    ModelError,
    ModelNotConfigured,
    ModelOverloaded,
    ModelRateLimited,
    ModelStreamInterrupted,
)
from bot.providers.anthropic import AnthropicProvider
from bot.providers.base import (
    ModelReply,
    ModelRequest,
    Provider,
    TextCallback,
    ToolStartCallback,
)
from bot.providers.failures import retry_delay

if TYPE_CHECKING:
    from bot.metrics import Metrics
    from bot.store.shared_state import SharedStateStore

log = logging.getLogger(__name__)

COOLDOWN_SCOPE = "model-cooldown"


@dataclass(frozen=True, slots=True)
class ModelHealth:
    """One model's figures since this process started, for the console's health page."""

    provider: str
    model: str
    calls: int
    failures: int
    fallbacks: int  # moves from this model to the next of its chain
    cooling: str | None  # why it is being skipped now, or None


def failure_kind(error: ModelError) -> str:
    """A short word for metrics and notices."""
    if isinstance(error, ModelOverloaded):
        return "overloaded"
    if isinstance(error, ModelRateLimited):
        return "rate_limited"
    if isinstance(error, ModelAuthError | ModelNotConfigured):
        return "auth"
    if isinstance(error, ModelStreamInterrupted):
        return "interrupted"
    if error.falls_back:
        return "unavailable"
    return "rejected"


WHY = {
    "overloaded": "overloaded",
    "rate_limited": "rate-limited",
    "interrupted": "breaking off mid-reply",
    "unavailable": "unavailable",
}


def build_provider(config: Config, name: str) -> Provider:
    settings = config.provider(name)
    if settings.kind == ProviderKind.ANTHROPIC:
        return AnthropicProvider(name, settings)
    # Imported only when configured: the SDK adds most of a second to every CLI command.
    from bot.providers.openai import OpenAIProvider

    return OpenAIProvider(name, settings, text_max_chars=config.media.text_max_chars)


class ModelClient:
    """The service's model calls; one instance per running service."""

    def __init__(
        self,
        config: Config,
        *,
        state: SharedStateStore | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.state = state
        self.metrics = metrics
        self.clock = clock
        self.providers = {name: build_provider(config, name) for name in config.provider_names()}

    def provider_of(self, model: str) -> tuple[str, Provider]:
        name = split_model_id(model).provider
        return name, self.providers[name]

    @property
    def configured(self) -> bool:
        """Whether the default model's provider has what a call needs."""
        return self.provider_of(self.config.agent.model)[1].configured

    async def close(self) -> None:
        for provider in self.providers.values():
            await provider.close()

    # --- which model --------------------------------------------------------------------

    def chain(self, model: str) -> list[str]:
        """`model`, then agent.fallback_models, each once."""
        return list(dict.fromkeys([model, *self.config.agent.fallback_models]))

    def has_next(self, model: str, tried: Collection[str]) -> bool:
        return any(m not in tried for m in self.chain(model))

    async def cooling(self, model: str) -> str | None:
        """Why `model` is being skipped for now, or None when it is not."""
        if self.state is None:
            return None
        return await self.state.state_get(COOLDOWN_SCOPE, model, self.clock())

    async def next_model(self, model: str, tried: Collection[str] = ()) -> str | None:
        """The first model of `model`'s chain not tried yet and not cooling down (or, when
        all of them are cooling down, the first not tried): None when none is left."""
        chain = self.chain(model)
        left = [m for m in chain if m not in tried]
        if len(chain) > 1:  # without fallback models nothing cools down
            for candidate in left:
                if await self.cooling(candidate) is None:
                    return candidate
        return left[0] if left else None

    async def serving(self, model: str) -> str:
        """The model a call meant for `model` goes to now."""
        return await self.next_model(model) or model

    async def failed(self, model: str, error: ModelError, next_model: str | None) -> None:
        """`model` failed in a way another model may not: it cools down, and the move to
        `next_model` is counted and logged."""
        error.model = model
        kind = failure_kind(error)
        cooldown = self.config.agent.fallback_cooldown_seconds
        if self.state is not None and cooldown > 0 and len(self.chain(model)) > 1:
            now = self.clock()
            await self.state.state_put(COOLDOWN_SCOPE, model, WHY[kind], now + cooldown, now)
        if next_model is None:
            return
        provider = split_model_id(model).provider
        if self.metrics is not None:
            self.metrics.model_fallbacks.labels(provider, model, next_model).inc()
        log.warning(
            "%s is %s (%s); falling back to %s (and skipping it for %.0f s)",
            model,
            WHY[kind],
            error,
            next_model,
            cooldown,
        )

    async def health(self) -> list[ModelHealth]:
        """Every model the config lists, with its calls, failures and fallbacks."""
        rows = []
        for model in self.config.listed_models():
            provider = split_model_id(model).provider
            labels = {"provider": provider, "model": model}
            rows.append(
                ModelHealth(
                    provider,
                    model,
                    int(self._total("krill_model_calls_total", labels)),
                    int(self._total("krill_model_failures_total", labels)),
                    int(self._total("krill_model_fallbacks_total", labels)),
                    await self.cooling(model),
                )
            )
        return rows

    def _total(self, name: str, labels: dict[str, str]) -> float:
        """The sum of a counter's samples whose labels include `labels`."""
        if self.metrics is None:
            return 0.0
        return sum(
            sample.value
            for family in self.metrics.registry.collect()
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    # --- calls ----------------------------------------------------------------------------

    async def call(
        self,
        *,
        model: str,
        system: list[TextBlockParam],
        messages: list[MessageParam],
        tools: list[ToolUnionParam] | None = None,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
        max_tokens: int | None = None,
        fallback_left: bool = False,
    ) -> ModelReply:
        """One model, with its provider's retries; `fallback_left` says whether an overload
        or a long rate limit should end the retries at once (another model can answer)."""
        name, provider = self.provider_of(model)
        settings = self.config.provider(name)
        system, tool_defs, messages = apply_breakpoints(
            system=system, tools=tools or [], messages=messages, ttl=self.config.anthropic.cache_ttl
        )
        wanted = max_tokens or self.config.agent.max_tokens
        # Asking for more than the model can write is refused with a 400, not trimmed.
        output_limit = self.config.model_limits(model).max_output_tokens
        request = ModelRequest(
            model=split_model_id(model).name,
            system=system,
            messages=messages,
            tools=tool_defs,
            max_tokens=min(wanted, output_limit) if output_limit else wanted,
            images=self.config.model_settings(model).images,
        )
        retries = 0
        while True:
            if self.metrics is not None:
                self.metrics.model_calls.labels(name, model).inc()
            try:
                reply = await provider.stream(request, on_text, on_tool_start)
            except ModelError as exc:
                exc.model = model
                if self.metrics is not None:
                    self.metrics.model_failures.labels(name, model, failure_kind(exc)).inc()
                wait = retry_delay(
                    exc,
                    retries_done=retries,
                    max_retries=settings.max_retries,
                    longest_wait=self.config.agent.fallback_after_seconds,
                    fallback_left=fallback_left,
                    jitter=random.random(),
                )
                log.warning("model call to %s failed: %s", model, exc)
                if wait is None:
                    raise
                retries += 1
                await asyncio.sleep(wait)
                continue
            reply.model = model
            return reply

    async def complete(
        self,
        *,
        system: list[TextBlockParam],
        messages: list[MessageParam],
        tools: list[ToolUnionParam] | None = None,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> ModelReply:
        """One call for `model` (default agent.model), falling back through its chain with
        the same request."""
        wanted = model or self.config.agent.model
        tried: list[str] = []
        current = await self.serving(wanted)
        while True:
            tried.append(current)
            try:
                return await self.call(
                    model=current,
                    system=system,
                    messages=messages,
                    tools=tools,
                    on_text=on_text,
                    on_tool_start=on_tool_start,
                    max_tokens=max_tokens,
                    fallback_left=self.has_next(wanted, tried),
                )
            except ModelError as exc:
                following = await self.next_model(wanted, tried) if exc.falls_back else None
                if exc.falls_back:
                    await self.failed(current, exc, following)
                if following is None:
                    raise
                current = following
