"""`krill doctor`'s check of the Slack channel: does the bot token pass `auth.test`."""

from __future__ import annotations

from bot.checks import FAIL, NETWORK_TIMEOUT, OK, WARN, Check
from bot.config import Config


async def check(config: Config) -> list[Check]:
    if not config.slack.enabled:
        return [Check("slack", OK, "disabled")]
    # Imported here: `krill doctor` loads the platform library only when the channel is on.
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(
        token=config.slack.bot_token,
        base_url=config.slack.api_base_url,
        timeout=int(NETWORK_TIMEOUT),
    )
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        return [Check("slack", FAIL, f"auth.test failed: {exc.response.get('error')}")]
    except Exception as exc:
        return [Check("slack", WARN, f"could not reach {config.slack.api_base_url}: {exc}")]
    return [
        Check("slack", OK, f"bot token works for {auth.get('user')} ({config.slack.mode} mode)")
    ]
