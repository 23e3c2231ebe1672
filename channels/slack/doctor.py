"""`krill doctor`'s check of the Slack channel: does the bot token pass `auth.test`."""

from __future__ import annotations

from bot.checks import FAIL, NETWORK_TIMEOUT, OK, Check
from bot.config import Config
from bot.config.origins import origin
from channels.slack.config import SlackConfig


async def check(slack: SlackConfig, config: Config) -> list[Check]:
    if not slack.enabled:
        return [Check("slack", OK, "disabled")]
    # Imported here: `krill doctor` loads the platform library only when the channel is on.
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(
        token=slack.bot_token,
        base_url=slack.api_base_url,
        timeout=int(NETWORK_TIMEOUT),
    )
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        where = origin(config, "slack", "bot_token")
        error = exc.response.get("error")
        return [Check("slack", FAIL, f"auth.test failed ({error}); check {where}")]
    except Exception as exc:
        where = origin(config, "slack", "api_base_url")
        return [
            Check(
                "slack",
                FAIL,
                f"cannot reach {slack.api_base_url} ({exc or type(exc).__name__}); "
                f"check the network, or {where}",
            )
        ]
    return [Check("slack", OK, f"bot token works for {auth.get('user')} ({slack.mode} mode)")]
