"""Reading the configuration: one TOML file, `KRILL_<SECTION>__<KEY>` overrides and the
conventional secret variables; errors name the key and the file and never echo a secret.

The channels' sections come from the registry a composition root hands in (`channels`):
their keys, secret variables and checks are the channels' own.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.config.providers import DEFAULT_PROVIDER, split_model_id
from bot.config.root import ChannelEntry, Config, config_model
from bot.config.sections import CONSOLE_TOKEN_MIN_CHARS
from bot.errors import ConfigError

ENV_PREFIX = "KRILL_"
CONFIG_ENV = "KRILL_CONFIG"
DEFAULT_CONFIG_NAME = "krill.toml"


# Conventional variables that fill secrets (and the model base URL) left empty in the config;
# each channel's section names its own (`ChannelSection.secret_env`).
SECRET_ENV: dict[tuple[str, str], str] = {
    ("anthropic", "api_key"): "ANTHROPIC_API_KEY",
    ("anthropic", "base_url"): "ANTHROPIC_BASE_URL",
    ("admin", "console_token"): "KRILL_ADMIN_TOKEN",
    ("transcription", "api_key"): "TRANSCRIPTION_API_KEY",
    ("memory.embeddings", "api_key"): "EMBEDDINGS_API_KEY",
    ("tools.web_search", "api_key"): "BRAVE_API_KEY",
}


def secret_variables(model: type[Config]) -> dict[tuple[str, str], str]:
    """Every conventional secret variable of `model`: the core's, then each channel's."""
    found = dict(SECRET_ENV)
    for name, section in model.channel_sections.items():
        found |= {(name, key): var for key, var in section.secret_env.items()}
    return found


def find_config_path(explicit: str | None, env: Mapping[str, str] | None = None) -> Path | None:
    """`--config`, else `$KRILL_CONFIG`, else `./krill.toml` if it exists, else None (defaults)."""
    env = os.environ if env is None else env
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        return path
    if env.get(CONFIG_ENV):
        path = Path(env[CONFIG_ENV]).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (from ${CONFIG_ENV})")
        return path
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    return default if default.is_file() else None


def _parse_env_value(raw: str) -> Any:
    """Env values are TOML/JSON literals when they parse as one (10, true, ["a"]), else strings."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Turn `KRILL_TELEGRAM__MODE=webhook` into `{"telegram": {"mode": "webhook"}}`."""
    result: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = result
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: conflicts with another KRILL_ variable")
        node[parts[-1]] = _parse_env_value(raw)
    return result


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# Keys whose values are never echoed in an error, even when they have the wrong type.
SECRET_KEY_RE = re.compile(r"(?:^|_)(?:token|secret|key|password|passwd)$|^(?:env|headers)$", re.I)


def _format_validation(err: ValidationError, where: str) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        else:
            msg = e["msg"]
            # storage.url may carry a password; its validator names what it got, masked.
            secret = any(SECRET_KEY_RE.search(str(part)) for part in e["loc"]) or key == (
                "storage.url"
            )
            if "input" in e and not isinstance(e["input"], dict | list) and not secret:
                msg += f" (got {e['input']!r})"
        lines.append(f"{where}: {key}: {msg}")
    return "\n".join(lines)


def load_config(
    path: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    channels: Iterable[ChannelEntry],
) -> Config:
    """Load, merge and validate, with a section for each of `channels` (the registry).
    Raises ConfigError with a message meant for a person."""
    env = dict(os.environ if env is None else env)
    source = find_config_path(path, env)
    data: dict[str, Any] = {}
    if source is not None:
        try:
            data = tomllib.loads(source.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read: {exc}") from exc
    overrides = env_overrides(env)
    merged = _merge(data, overrides)
    where = str(source) if source else "defaults"
    if overrides:
        where += " + KRILL_* environment"
    model = config_model(channels)
    try:
        config = model.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, where)) from None
    config.source = source
    config.base_dir = source.parent.resolve() if source else Path.cwd()
    for (section, key), var in secret_variables(model).items():
        sect: Any = config
        for part in section.split("."):  # nested tables: "memory.embeddings"
            sect = getattr(sect, part)
        if not getattr(sect, key) and env.get(var):
            setattr(sect, key, env[var])
    for provider in config.providers.values():
        if not provider.api_key and provider.api_key_env:
            provider.api_key = env.get(provider.api_key_env, "")
    _check_consistency(config, where)
    return config


def _provider_problems(config: Config) -> list[str]:
    """Every model id must name a configured provider; `anthropic` is the [anthropic] section."""
    problems = []
    if DEFAULT_PROVIDER in config.providers:
        problems.append(
            f"providers.{DEFAULT_PROVIDER}: the built-in Anthropic provider is configured in "
            f"[{DEFAULT_PROVIDER}] (base_url, api_key, timeout, max_retries); give another "
            "Anthropic-compatible provider a name of its own"
        )
    agent = config.agent
    named = {"agent.model": [agent.model], "agent.models": agent.models}
    named["agent.fallback_models"] = agent.fallback_models
    for key, ids in named.items():
        for model in ids:
            provider = split_model_id(model).provider
            if provider != DEFAULT_PROVIDER and provider not in config.providers:
                problems.append(
                    f"{key}: {model!r} names provider {provider!r}, which has no "
                    f"[providers.{provider}] table (configured: "
                    f"{', '.join(config.provider_names())})"
                )
    return problems


def _check_consistency(config: Config, where: str) -> None:
    problems = [p for section in config.channel_settings().values() for p in section.problems()]
    token = config.admin.console_token
    if token and len(token) < CONSOLE_TOKEN_MIN_CHARS:
        problems.append(
            f"admin.console_token (or KRILL_ADMIN_TOKEN): must be at least "
            f"{CONSOLE_TOKEN_MIN_CHARS} characters, this one has {len(token)}; make one with "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    search = config.tools.web_search
    if search.enabled and search.backend == "searxng" and not search.base_url:
        problems.append(
            "tools.web_search.base_url: required for the searxng backend "
            "(your SearXNG's address, e.g. http://127.0.0.1:8888)"
        )
    if search.enabled and search.backend == "brave" and not search.api_key:
        problems.append(
            "tools.web_search.api_key: required for the brave backend (or set BRAVE_API_KEY)"
        )
    problems += _provider_problems(config)
    for user in config.admin.users:
        if ":" not in user:
            problems.append(f"admin.users: {user!r} must look like '<channel>:<user_id>'")
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(config.agent.timezone)
    except Exception:
        problems.append(f"agent.timezone: unknown time zone {config.agent.timezone!r}")
    if problems:
        raise ConfigError("\n".join(f"{where}: {p}" for p in problems))
