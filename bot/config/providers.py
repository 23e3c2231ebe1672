"""Model providers (`[providers.<name>]`) and the model ids that name them.

A model id may carry its provider as a prefix, `"<provider>:<model>"` (`"local:qwen3:32b"`:
provider `local`, model `qwen3:32b`); an id without one belongs to the built-in Anthropic
provider, which is the `[anthropic]` section. Anthropic's own ids never hold a colon, so the
part before the first colon always names a provider, and a typo in it is a config error
instead of a request to the wrong place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from bot.config.sections import Section

# The provider every id without a prefix belongs to: the `[anthropic]` section.
DEFAULT_PROVIDER = "anthropic"


class ProviderKind(StrEnum):
    ANTHROPIC = "anthropic"  # the Messages API (api.anthropic.com, or a compatible proxy)
    OPENAI = "openai"  # any Chat Completions endpoint: OpenAI, OpenRouter, vLLM, Ollama, ...


class ProviderConfig(Section):
    """One `[providers.<name>]` table."""

    kind: ProviderKind
    base_url: str = ""  # empty: the kind's own service (api.openai.com/v1, api.anthropic.com)
    api_key: str = ""
    api_key_env: str = ""  # read the key from this environment variable instead
    timeout: float = Field(600.0, gt=0)
    # Failed calls (429, 5xx, 529, connection errors) are tried again this often; a rate
    # limit longer than agent.fallback_after_seconds, or an overload with a fallback model
    # left, is not waited out.
    max_retries: int = Field(2, ge=0)


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A model id split into the provider that serves it and the name that provider uses."""

    provider: str
    name: str


def split_model_id(model_id: str) -> ModelRef:
    """`"openrouter:meta-llama/llama-4"` -> (openrouter, meta-llama/llama-4); an id with no
    prefix is the default provider's."""
    provider, colon, name = model_id.partition(":")
    if colon and provider and name:
        return ModelRef(provider, name)
    return ModelRef(DEFAULT_PROVIDER, model_id)
