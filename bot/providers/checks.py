"""`krill doctor`'s provider checks: every configured provider that a listed model names is
reachable, takes its key, and knows each of those models (Anthropic: a token count per
model, which runs and bills nothing; an OpenAI-style server: its model list)."""

from __future__ import annotations

from typing import Any

from bot.checks import FAIL, NETWORK_TIMEOUT, OK, WARN, Check
from bot.config import DEFAULT_PROVIDER, Config, ProviderConfig, ProviderKind, split_model_id
from bot.config.origins import origin

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"
SHOWN_MODELS = 8


def key_origin(config: Config, name: str) -> str:
    """Where provider `name`'s key is set, for a message that says what to fix."""
    if name == DEFAULT_PROVIDER:
        return origin(config, "anthropic", "api_key")
    variable = config.providers[name].api_key_env
    if variable:
        return f"the variable {variable} (providers.{name}.api_key_env)"
    return origin(config, f"providers.{name}", "api_key")


def url_origin(config: Config, name: str) -> str:
    if name == DEFAULT_PROVIDER:
        return origin(config, "anthropic", "base_url")
    return origin(config, f"providers.{name}", "base_url")


async def count_tokens(settings: ProviderConfig, model: str, tools: Any = None) -> None:
    """One token count: checks the key, the model and `tools` without running or billing
    anything. Raises what the SDK raises."""
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=settings.api_key,
        base_url=settings.base_url or None,
        max_retries=0,
        timeout=NETWORK_TIMEOUT,
    )
    try:
        await client.messages.count_tokens(
            model=model,
            messages=[{"role": "user", "content": "ping"}],
            tools=tools or anthropic.omit,
        )
    finally:
        await client.close()


async def check_anthropic(config: Config, name: str, models: list[str]) -> Check:
    import anthropic

    settings = config.provider(name)
    if not settings.api_key:
        hint = "ANTHROPIC_API_KEY or anthropic.api_key" if name == DEFAULT_PROVIDER else ""
        return Check(name, FAIL, f"no API key: set {hint or key_origin(config, name)}")
    url = settings.base_url or ANTHROPIC_URL
    for model in models:
        try:
            await count_tokens(settings, split_model_id(model).name)
        except anthropic.AuthenticationError:
            where = key_origin(config, name)
            return Check(name, FAIL, f"the API key was rejected (401); check {where}")
        except anthropic.NotFoundError:
            return Check(name, FAIL, f"model {model!r} was not found; fix {model_keys(model)}")
        except anthropic.APIStatusError as exc:
            return Check(name, FAIL, f"{url} answered {exc.status_code}: {exc.message}")
        except Exception as exc:
            return Check(name, FAIL, unreachable(config, name, url, exc))
    return Check(name, OK, f"key accepted; model {', '.join(models)}")


async def check_openai(config: Config, name: str, models: list[str]) -> Check:
    import openai

    settings = config.provider(name)
    url = settings.base_url or OPENAI_URL
    client = openai.AsyncOpenAI(
        api_key=settings.api_key or "no-key",
        base_url=settings.base_url or None,
        max_retries=0,
        timeout=NETWORK_TIMEOUT,
    )
    try:
        listed = {model.id async for model in client.models.list()}
    except openai.AuthenticationError:
        where = key_origin(config, name)
        return Check(name, FAIL, f"{url} rejected the API key (401); check {where}")
    except openai.NotFoundError:
        return Check(
            name, WARN, f"{url} is up but lists no models; {', '.join(models)} not checked"
        )
    except openai.APIStatusError as exc:
        return Check(name, FAIL, f"{url} answered {exc.status_code}: {exc.message}")
    except Exception as exc:
        return Check(name, FAIL, unreachable(config, name, url, exc))
    finally:
        await client.close()
    missing = [m for m in models if split_model_id(m).name not in listed]
    if missing:
        offered = ", ".join(sorted(listed)[:SHOWN_MODELS]) + (
            ", …" if len(listed) > SHOWN_MODELS else ""
        )
        return Check(
            name,
            FAIL,
            f"{url} does not offer {', '.join(missing)} (it lists: {offered or 'nothing'}); "
            f"fix {model_keys(missing[0])}",
        )
    return Check(name, OK, f"{url} reachable, key accepted; offers {', '.join(models)}")


def model_keys(model: str) -> str:
    return f"the id {model!r} in agent.model, agent.models or agent.fallback_models"


def unused(name: str) -> str:
    return (
        f"[providers.{name}] is configured, but no id in agent.model, agent.models or "
        f"agent.fallback_models starts with '{name}:'; it is not checked"
    )


def unreachable(config: Config, name: str, url: str, exc: BaseException) -> str:
    return (
        f"cannot reach {url} ({type(exc).__name__}: {exc}); check the network, or "
        f"{url_origin(config, name)}"
    )


async def check_providers(config: Config) -> list[Check]:
    """One check per provider that a listed model names; a [providers.<name>] table no
    listed model names is a warning (a typo in a prefix, or a provider left over)."""
    checks = []
    for name in config.provider_names():
        models = [m for m in config.listed_models() if split_model_id(m).provider == name]
        if not models:
            if name != DEFAULT_PROVIDER:
                checks.append(Check(name, WARN, unused(name)))
            continue
        if config.provider(name).kind == ProviderKind.ANTHROPIC:
            checks.append(await check_anthropic(config, name, models))
        else:
            checks.append(await check_openai(config, name, models))
    return checks
