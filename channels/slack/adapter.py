"""The Slack channel: signs in, wires the Bolt listeners to the inbound and slash-command
parts, and routes the core's replies to posts, edits, streams and private answers.

Every event is handed to the gateway inside the Bolt listener, and the app runs with
`process_before_response=True`, so Slack's acknowledgement (HTTP 200 or the Socket Mode ack)
leaves only once the message is durably recorded. The model turn runs afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.backoff import Backoff
from bot.channel_contract import Gateway
from bot.types import Address, OutboundFile, OutboundMessage
from channels.pacing import Limit, Window
from channels.slack.api import (
    FATAL_BOT_TOKEN_ERRORS,
    api_error,
    client_timeout,
    network_failure,
    send_failure,
)
from channels.slack.buttons import ACTION_PREFIX, LABEL_CHARS, SlackPresses
from channels.slack.config import SlackConfig
from channels.slack.files import SlackFiles, upload
from channels.slack.format import CHUNK_CHARS, split_markdown
from channels.slack.history import ThreadHistory
from channels.slack.inbound import Inbound
from channels.slack.indicators import TYPING_REFRESH_SECONDS, Indicators
from channels.slack.mapping import CHANNEL, BotIdentity
from channels.slack.outbound import Poster
from channels.slack.people import People
from channels.slack.slash import SlashCommands
from channels.slack.streams import Streams
from channels.slack.transport import (
    BACKOFF_CAP_SECONDS,
    BACKOFF_FIRST_SECONDS,
    DEFAULT_PING_INTERVAL,
    EVENTS_PATH,
    STALE_AFTER,
    HttpEvents,
    SlackSetupError,
    SocketTransport,
)

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 3
# A 500/503 from Slack is usually momentary; without a retry the reply would wait for a
# restart to be delivered again.
SERVER_ERROR_RETRIES = 2


class SlackChannel:
    """The `bot.channel_contract.Channel` for Slack, on slack-bolt's `AsyncApp`."""

    name = CHANNEL
    typing_interval = TYPING_REFRESH_SECONDS
    button_label_chars = LABEL_CHARS

    def __init__(
        self,
        config: SlackConfig,
        core: Gateway,
        *,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        stale_after: float = STALE_AFTER,
        media_max_bytes: int | None = None,
    ):
        self.config = config
        self.core = core
        self.stream_interval = config.stream_interval
        self.ping_interval = ping_interval
        self.stale_after = stale_after
        self.client = AsyncWebClient(
            token=config.bot_token,
            base_url=config.api_base_url.rstrip("/") + "/",
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(),
                AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
                AsyncServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES),
            ],
            logger=logging.getLogger("channels.slack.web"),
        )
        self.me = BotIdentity(user_id="", bot_id="")
        # Replies are posted without the SDK's own retries: the outbox owns those.
        self.poster = Poster(
            AsyncWebClient(
                token=config.bot_token,
                base_url=config.api_base_url.rstrip("/") + "/",
                retry_handlers=[],
                logger=logging.getLogger("channels.slack.web"),
            ),
            Window(Limit(1, config.pacing.channel_interval)),
        )
        self.streams = Streams(self.client, self.poster, core)
        self.indicators = Indicators(self.client, core, config.ack_reaction, config.done_reaction)
        self.slash = SlashCommands(core, self.client, self.poster)
        self.people = People(self.client)
        self.inbound = Inbound(
            config,
            core,
            self._identity,
            self.people,
            ThreadHistory(self.client, self.people, self._identity),
            self.streams,
            files=SlackFiles(config.bot_token, config.api_base_url, media_max_bytes)
            if media_max_bytes is not None
            else None,
        )
        self.app = AsyncApp(
            client=self.client,
            signing_secret=config.signing_secret,
            # Listeners run before the ack is sent: the ack then means "durably recorded".
            process_before_response=True,
            request_verification_enabled=config.mode == "http",
            logger=logging.getLogger("channels.slack.bolt"),
            name="krill",
        )
        self.app.event("message")(self.inbound.on_message_event)
        self.app.event("app_mention")(self.inbound.on_message_event)
        self.app.command(re.compile(r".*"))(self.slash.on_command)
        self.app.action(re.compile("^" + re.escape(ACTION_PREFIX)))(
            SlackPresses(core, self.client).on_action
        )
        # Every other event is acknowledged (a 404 would make Slack retry it) and ignored.
        self.app.event(re.compile(r".*"))(self.inbound.on_other_event)

        self._ready = asyncio.Event()
        # Socket Mode needs no signing secret, and the verifier refuses an empty one.
        self._http = (
            HttpEvents(self.app, config.signing_secret, self._ready)
            if config.mode == "http"
            else None
        )
        self._socket: SocketTransport | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def healthy(self) -> bool:
        """For /healthz: in Socket Mode, whether Slack answered a ping lately."""
        return self._socket is None or self._socket.healthy

    def _identity(self) -> BotIdentity:
        return self.me

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        # One session, so every Web API call (replies and lookups included) has the
        # timeouts of [slack.timeouts].
        self._session = aiohttp.ClientSession(timeout=client_timeout(self.config.timeouts))
        self.client.session = self._session
        self.poster.client.session = self._session
        self.me = await self._identify()
        self.core.register_bot_username(CHANNEL, self.me.name)
        self._ready.set()
        if self.config.mode == "socket":
            self._socket = SocketTransport(
                self.app,
                self.config.app_token,
                ping_interval=self.ping_interval,
                stale_after=self.stale_after,
            )
            await self._socket.start()
        log.info(
            "slack: signed in as @%s (%s, bot %s) in team %s; receiving events over %s",
            self.me.name,
            self.me.user_id,
            self.me.bot_id,
            self.me.team_id,
            "Socket Mode" if self.config.mode == "socket" else f"HTTP at {EVENTS_PATH}",
        )

    async def _identify(self) -> BotIdentity:
        """auth.test, retried while Slack is unreachable; a refused token stops start-up."""
        backoff = Backoff(BACKOFF_FIRST_SECONDS, BACKOFF_CAP_SECONDS)
        while True:
            try:
                auth = await self.client.auth_test()
                break
            except SlackApiError as exc:
                if api_error(exc) in FATAL_BOT_TOKEN_ERRORS:
                    raise SlackSetupError(
                        f"Slack refused slack.bot_token ({api_error(exc)}); it must be the "
                        "app's bot token (xoxb-...) from OAuth & Permissions"
                    ) from exc
                delay = backoff.next()
                log.warning(
                    "slack: auth.test failed (%s); retrying in %.0fs", api_error(exc), delay
                )
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                delay = backoff.next()
                log.warning("slack: cannot reach Slack (%s); retrying in %.0fs", exc, delay)
            await asyncio.sleep(delay)
        return BotIdentity(
            user_id=str(auth.get("user_id", "")),
            bot_id=str(auth.get("bot_id", "")),
            team_id=str(auth.get("team_id", "")),
            name=str(auth.get("user") or "krill"),
        )

    async def stop(self) -> None:
        if self._socket is not None:
            await self._socket.stop()
        await self.slash.stop()
        await self.people.stop()
        if self._session is not None:
            await self._session.close()

    def routes(self) -> list[web.RouteDef]:
        return self._http.routes() if self._http is not None else []

    # --- outbound -------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return split_markdown(markdown, CHUNK_CHARS) if markdown.strip() else []

    async def deliver(self, out: OutboundMessage) -> str:
        """Post, edit or stream one chunk, tried once; a failure is raised as a classified
        `SendFailure` for the outbox."""
        try:
            return await self._deliver(out)
        except SlackApiError as exc:
            raise send_failure(exc) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise network_failure(exc) from exc

    async def _deliver(self, out: OutboundMessage) -> str:
        if out.address.private_to:
            return await self.slash.send_private(out)
        if out.edit_of:
            streamed = await self.streams.update(out.edit_of, out)
            return streamed if streamed is not None else await self.poster.edit(out)
        if not out.final:
            streamed = await self.streams.start(out)
            if streamed is not None:
                return streamed
        return await self.poster.post(
            out.address,
            out.text,
            out.chunk_id,
            final=out.final,
            sources=out.sources,
            buttons=out.buttons,
        )

    async def send_file(self, address: Address, file: OutboundFile) -> str:
        """Upload one file, tried once; a failure is a classified `SendFailure`."""
        try:
            return await upload(self.client, address, file)
        except SlackApiError as exc:
            raise send_failure(exc) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise network_failure(exc) from exc

    async def find_sent(self, out: OutboundMessage) -> str | None:
        """A post a crash left unknown: look its chunk id up (edits and private answers are
        simply done again: an edit twice shows the same text)."""
        if out.edit_of or out.address.private_to or not out.chunk_id:
            return None
        try:
            return await self.poster.find(out)
        except SlackApiError as exc:
            raise send_failure(exc) from exc

    async def typing(self, address: Address) -> None:
        await self.indicators.typing(address)

    async def done_typing(self, address: Address) -> None:
        await self.indicators.done_typing(address)
