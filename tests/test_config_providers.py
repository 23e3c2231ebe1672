"""Providers in the config: ids that name a provider no table configures are refused with the
key that names them, the built-in `anthropic` stays the [anthropic] section, a key may come
from the variable `api_key_env` names and is masked in logs, and [models] prices reach the
price table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.pricing import DEFAULT_PRICE, estimate_cost, model_price
from bot.cli import _secrets
from bot.config import Config, ModelRef, load_config, split_model_id
from bot.config.models import ModelConfig
from bot.errors import ConfigError
from bot.logs import redact
from bot.types import Usage
from channels.registry import CHANNELS

LOCAL = '[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "krill.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(str(path), env=env or {}, channels=CHANNELS)


def test_model_ids_name_their_provider_before_the_first_colon() -> None:
    assert split_model_id("local:qwen3:32b") == ModelRef("local", "qwen3:32b")
    assert split_model_id("openrouter:meta-llama/llama-4") == ModelRef(
        "openrouter", "meta-llama/llama-4"
    )
    assert split_model_id("claude-sonnet-4-6") == ModelRef("anthropic", "claude-sonnet-4-6")


def test_an_id_naming_an_unconfigured_provider_is_refused_with_its_key(tmp_path: Path) -> None:
    text = LOCAL + '[agent]\nmodels = ["local:qwen3:32b", "lokal:qwen3"]\n'
    with pytest.raises(ConfigError, match=r"agent\.models: 'lokal:qwen3' names provider 'lokal'"):
        load(tmp_path, text)
    with pytest.raises(ConfigError, match=r"agent\.fallback_models: 'x:y'"):
        load(tmp_path, '[agent]\nfallback_models = ["x:y"]\n')


def test_the_built_in_provider_is_the_anthropic_section(tmp_path: Path) -> None:
    text = '[providers.anthropic]\nkind = "anthropic"\n'
    with pytest.raises(ConfigError, match=r"providers\.anthropic: the built-in"):
        load(tmp_path, text)
    config = load(tmp_path, "[anthropic]\nmax_retries = 5\n")
    assert config.provider("anthropic").max_retries == 5
    assert config.provider_names() == ["anthropic"]


def test_a_key_comes_from_the_variable_api_key_env_names(tmp_path: Path) -> None:
    text = LOCAL + 'api_key_env = "LOCAL_KEY"\n[agent]\nmodel = "local:qwen3:32b"\n'
    config = load(tmp_path, text, {"LOCAL_KEY": "sk-local"})
    assert config.provider("local").api_key == "sk-local"
    with pytest.raises(ConfigError, match=r"providers\.local\.kind"):
        load(tmp_path, '[providers.local]\nkind = "gemini"\n')


def test_a_provider_key_is_masked_in_log_lines_like_the_other_secrets(tmp_path: Path) -> None:
    key = "lan-server-key-0123456789"  # no shape the log filter would know by itself
    text = LOCAL + 'api_key_env = "LOCAL_KEY"\n'
    config = load(tmp_path, text, {"LOCAL_KEY": key})
    line = redact(f"POST /v1/chat/completions with Authorization: {key}", _secrets(config))
    assert key not in line and key[6:-4] not in line


def test_models_prices_are_used_and_unknown_models_cost_like_sonnet() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000)
    free = ModelConfig(input_usd_per_mtok=0, output_usd_per_mtok=0)
    assert estimate_cost("local:qwen3", usage, own=free) == 0
    assert not model_price("local:qwen3").known and model_price("local:qwen3", free).known
    unknown = model_price("local:qwen3")
    assert (unknown.input, unknown.output) == DEFAULT_PRICE
    priced = ModelConfig(input_usd_per_mtok=2, output_usd_per_mtok=8, cached_input_usd_per_mtok=0.5)
    assert estimate_cost("openrouter:x", usage, own=priced) == pytest.approx(10.5)
    # Claude's own prices stay known; a [models] table may still override them.
    assert model_price("claude-haiku-4-5").input == 1.0
    assert model_price("claude-haiku-4-5", ModelConfig(input_usd_per_mtok=0.8)).input == 0.8
