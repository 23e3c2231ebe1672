"""The Slack channel: Bolt listeners that turn events into `InboundMessage`s for the core, and
the Web API calls that show replies (posts, edits, native streams, ephemeral command answers,
typing indicators).

Every event is handed to `core.accept` inside the Bolt listener, and the app runs with
`process_before_response=True`, so Slack's acknowledgement (HTTP 200 or the Socket Mode ack)
leaves only once the message is durably recorded. The model turn runs afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.channel_contract import AcceptResult
from bot.config import SlackConfig
from bot.sessions.limits import requires_mention
from bot.types import Address, ChatType, InboundMessage, OutboundMessage
from channels.slack.format import CHUNK_CHARS, split_markdown, to_mrkdwn
from channels.slack.mapping import (
    CHANNEL,
    BotIdentity,
    SlackPost,
    history_users,
    parse_event,
    slash_message,
    slash_text,
    thread_context_lines,
    to_inbound,
)
from channels.slack.transport import (
    DEFAULT_PING_INTERVAL,
    EVENTS_PATH,
    HttpEvents,
    SlackSetupError,
    SocketTransport,
    backoff_delay,
)

if TYPE_CHECKING:
    from bot.gateway.service import GatewayService

log = logging.getLogger(__name__)

THINKING_STATUS = "is thinking…"
TYPING_REACTION = "hourglass_flowing_sand"
# setStatus lasts two minutes unless a message clears it; refresh well inside that.
TYPING_REFRESH_SECONDS = 60.0
RATE_LIMIT_RETRIES = 3
# A 500/503 from Slack is usually momentary; without a retry the reply would wait for a
# restart to be delivered again.
SERVER_ERROR_RETRIES = 2
# Lookups made before the acknowledgement must leave time under Slack's 3 s deadline.
USER_LOOKUP_SECONDS = 1.0
HISTORY_FETCH_SECONDS = 1.5
HISTORY_PAGE_SIZE = 200
HISTORY_MAX_PAGES = 5
HISTORY_MAX_NAME_LOOKUPS = 10
NAME_RETRY_SECONDS = 600.0
RESPONSE_URL_SECONDS = 1_500.0  # Slack honours a response_url for 30 minutes
MEMORY_ITEMS = 10_000  # bound of each in-memory map (seen events, threads, names, ...)
NOT_ENABLED_HERE = "Krill is not enabled in this conversation."

# Errors meaning "this workspace/app cannot take `markdown_text`": fall back to mrkdwn text.
MARKDOWN_REJECTED = frozenset(
    {"no_text", "invalid_arguments", "invalid_blocks", "markdown_text_conflict"}
)
# Errors meaning a feature (native streaming, thread status) is off for this app everywhere.
FEATURE_UNAVAILABLE = frozenset(
    {
        "unknown_method",
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "feature_not_enabled",
        "method_not_supported_for_channel_type",
    }
)
FATAL_BOT_TOKEN_ERRORS = frozenset({"invalid_auth", "not_authed", "token_revoked"})

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Recent(Mapping[K, V]):
    """A mapping that forgets its oldest entries beyond `limit` (memory stays bounded)."""

    def __init__(self, limit: int = MEMORY_ITEMS):
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)


@dataclass(slots=True)
class _Stream:
    """A native Slack stream (chat.startStream) still open, and the text it shows."""

    channel: str
    shown: str


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error", "")) if exc.response is not None else ""


def _header(request: AsyncBoltRequest, name: str) -> str | None:
    values = request.headers.get(name)
    return values[0] if values else None


class SlackChannel:
    """The `bot.channel_contract.Channel` for Slack, on slack-bolt's `AsyncApp`."""

    name = CHANNEL
    typing_interval = TYPING_REFRESH_SECONDS

    def __init__(
        self,
        config: SlackConfig,
        core: GatewayService,
        *,
        ping_interval: float = DEFAULT_PING_INTERVAL,
    ):
        self.config = config
        self.core = core
        self.stream_interval = config.stream_interval
        self.ping_interval = ping_interval
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
        self.app = AsyncApp(
            client=self.client,
            signing_secret=config.signing_secret,
            # Listeners run before the ack is sent: the ack then means "durably recorded".
            process_before_response=True,
            request_verification_enabled=config.mode == "http",
            logger=logging.getLogger("channels.slack.bolt"),
            name="krill",
        )
        self.app.event("message")(self._on_message_event)
        self.app.event("app_mention")(self._on_message_event)
        self.app.command(re.compile(r".*"))(self._on_command)
        # Every other event is acknowledged (a 404 would make Slack retry it) and ignored.
        self.app.event(re.compile(r".*"))(self._on_other_event)

        self.me = BotIdentity(user_id="", bot_id="")
        self._ready = asyncio.Event()
        # Socket Mode needs no signing secret, and the verifier refuses an empty one.
        self._http = (
            HttpEvents(self.app, config.signing_secret, self._ready)
            if config.mode == "http"
            else None
        )
        self._socket: SocketTransport | None = None
        self._session: aiohttp.ClientSession | None = None

        self._handled_events: _Recent[str, bool] = _Recent()
        self._handled_posts: _Recent[str, bool] = _Recent()
        self._inflight: dict[str, asyncio.Future[None]] = {}
        self._threads: _Recent[tuple[str, str], bool] = _Recent()  # threads Krill answers in
        self._names: _Recent[str, str] = _Recent()
        self._name_failures: _Recent[str, float] = _Recent()
        self._recipients: _Recent[tuple[str, str], tuple[str, str]] = _Recent()
        self._response_urls: _Recent[tuple[str, str], tuple[str, float]] = _Recent()
        self._streams: _Recent[str, _Stream] = _Recent()
        self._reactions: _Recent[tuple[str, str], bool] = _Recent()
        self._statuses: _Recent[tuple[str, str], bool] = _Recent()
        self._status_off: set[str] = set()  # channels where setStatus failed ("*": all)
        self._markdown_ok = True
        self._native_stream = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._ephemeral_ids = itertools.count(1)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self.client.session = self._session
        self.me = await self._identify()
        self.core.bot_usernames[CHANNEL] = self.me.name
        self._ready.set()
        if self.config.mode == "socket":
            self._socket = SocketTransport(
                self.app, self.config.app_token, ping_interval=self.ping_interval
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
        attempt = 0
        while True:
            try:
                auth = await self.client.auth_test()
                break
            except SlackApiError as exc:
                if _error(exc) in FATAL_BOT_TOKEN_ERRORS:
                    raise SlackSetupError(
                        f"Slack refused slack.bot_token ({_error(exc)}); it must be the app's "
                        "bot token (xoxb-...) from OAuth & Permissions"
                    ) from exc
                delay = backoff_delay(attempt)
                log.warning("slack: auth.test failed (%s); retrying in %.0fs", _error(exc), delay)
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                delay = backoff_delay(attempt)
                log.warning("slack: cannot reach Slack (%s); retrying in %.0fs", exc, delay)
            attempt += 1
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
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def routes(self) -> list[web.RouteDef]:
        return [self._http.route()] if self._http is not None else []

    # --- inbound: events ------------------------------------------------------------------

    async def _on_message_event(self, body: dict[str, Any], request: AsyncBoltRequest) -> None:
        event_id = str(body.get("event_id", ""))
        if event_id and event_id in self._handled_events:
            log.debug(
                "slack: event %s already handled (retry %s)",
                event_id,
                _header(request, "x-slack-retry-num") or "-",
            )
            return
        parsed = parse_event(
            body.get("event") or {},
            self.me,
            allow_bots=self.config.allow_bots,
            team_id=str(body.get("team_id", "")),
            names=self._names,
        )
        if isinstance(parsed, SlackPost):
            await self._ingest_once(parsed)
        else:
            log.debug("slack: ignoring event %s: %s", event_id or "-", parsed.reason)
        if event_id:
            self._handled_events.put(event_id, True)

    async def _on_other_event(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.debug("slack: ignoring %r event %s", event.get("type"), body.get("event_id", "-"))

    async def _ingest_once(self, post: SlackPost) -> None:
        """Run `_ingest` once per post even when Slack delivers it twice at the same time
        (app_mention + message, or a retry): the second delivery waits for the first."""
        if post.message_id in self._handled_posts:
            log.debug("slack: %s already handled", post.message_id)
            return
        pending = self._inflight.get(post.message_id)
        if pending is None:
            pending = asyncio.ensure_future(self._ingest(post))
            self._inflight[post.message_id] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(post.message_id, None))
        # shield: if this delivery's request is dropped, the post is still recorded.
        await asyncio.shield(pending)
        self._handled_posts.put(post.message_id, True)

    async def _ingest(self, post: SlackPost) -> None:
        msg = to_inbound(post, mentioned=post.mentioned)
        fetch_history = False
        if post.chat_type == ChatType.CHANNEL and post.thread_ts is not None:
            joined = await self._takes_part(post, msg)
            if not joined and not post.mentioned and requires_mention(self.config, post.channel):
                # Chatter in someone else's thread: not stored, because the thread's history
                # is fetched from Slack if the bot is ever called into it.
                log.debug("slack: %s is chatter in a thread Krill is not in", post.message_id)
                return
            msg.mentioned = post.mentioned or joined
            fetch_history = not joined
        user_name, context = await asyncio.gather(
            self._user_name(post), self._thread_context(post) if fetch_history else _nothing()
        )
        msg.user_name = user_name
        msg.context_lines = context
        thread = msg.address.thread_id
        if thread and post.chat_type == ChatType.CHANNEL:
            # Native streams in channels must name who they are for.
            self._recipients.put((post.channel, thread), (post.team, post.user))
        result = await self.core.accept(msg)
        if result == AcceptResult.ACCEPTED and thread and post.chat_type == ChatType.CHANNEL:
            self._threads.put((post.channel, thread), True)
        log.info(
            "slack: %s %s from %s in %s%s%s",
            result,
            msg.message_id,
            post.user,
            post.channel,
            f" thread {thread}" if thread else "",
            f" (+{len(context)} thread messages)" if context else "",
        )

    async def _takes_part(self, post: SlackPost, msg: InboundMessage) -> bool:
        """Whether the bot is already part of the thread `post` replies in."""
        assert post.thread_ts is not None
        if post.parent_is_bot or (post.channel, post.thread_ts) in self._threads:
            return True
        return await self.core.session_exists(msg)

    async def _user_name(self, post: SlackPost) -> str:
        if post.user_name:
            return post.user_name
        return await self._lookup_name(post.user)

    async def _lookup_name(self, user: str) -> str:
        """A person's display name via users.info, cached; "" when unknown (the id is used)."""
        known = self._names.get(user)
        if known is not None:
            return known
        failed_at = self._name_failures.get(user)
        if failed_at is not None and time.monotonic() - failed_at < NAME_RETRY_SECONDS:
            return ""
        try:
            reply = await asyncio.wait_for(self.client.users_info(user=user), USER_LOOKUP_SECONDS)
        except (SlackApiError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            log.debug("slack: no name for %s (%s)", user, exc)
            self._name_failures.put(user, time.monotonic())
            return ""
        info = reply.get("user") or {}
        profile = info.get("profile") or {}
        name = str(
            profile.get("display_name") or profile.get("real_name") or info.get("name") or ""
        )
        self._names.put(user, name)
        return name

    async def _thread_context(self, post: SlackPost) -> list[str]:
        """Earlier messages of the thread `post` is in, labelled by sender ([] on failure)."""
        assert post.thread_ts is not None
        try:
            async with asyncio.timeout(HISTORY_FETCH_SECONDS):
                messages = await self._thread_messages(post.channel, post.thread_ts)
                unknown = [u for u in history_users(messages) if u not in self._names]
                await asyncio.gather(
                    *(self._lookup_name(u) for u in unknown[:HISTORY_MAX_NAME_LOOKUPS])
                )
        except (SlackApiError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            # Context is a help, not a requirement: the post is still accepted without it.
            log.warning("slack: could not fetch thread %s history: %s", post.thread_ts, exc)
            return []
        return thread_context_lines(messages, before_ts=post.ts, me=self.me, names=self._names)

    async def _thread_messages(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(HISTORY_MAX_PAGES):
            reply = await self.client.conversations_replies(
                channel=channel, ts=thread_ts, limit=HISTORY_PAGE_SIZE, cursor=cursor
            )
            messages.extend(m for m in reply.get("messages") or [] if isinstance(m, dict))
            cursor = (reply.get("response_metadata") or {}).get("next_cursor") or None
            if not reply.get("has_more") or not cursor:
                break
        return messages

    # --- inbound: slash commands ----------------------------------------------------------

    async def _on_command(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        command = str(body.get("command") or "/krill")
        text = slash_text(str(body.get("text") or ""))
        if text is None:
            await ack(response_type="ephemeral", text=f"Unknown command. Try `{command} help`.")
            return
        msg = slash_message(body, text)
        if body.get("response_url"):
            expires = time.monotonic() + RESPONSE_URL_SECONDS
            self._response_urls.put((msg.chat_id, msg.user_id), (body["response_url"], expires))
        await ack()
        # Commands run after the ack: /compact can take longer than Slack's 3 s, and Slack
        # never retries a slash command, so there is nothing to record first.
        task = asyncio.create_task(self._run_command(msg), name=f"slack-command:{text}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_command(self, msg: InboundMessage) -> None:
        try:
            result = await self.core.accept(msg)
            log.info("slack: %s %r from %s in %s", result, msg.text, msg.user_id, msg.chat_id)
            if result == AcceptResult.IGNORED:
                await self.deliver(OutboundMessage(msg.address, NOT_ENABLED_HERE, "", 0))
        except Exception:
            log.exception("slack: command %r from %s failed", msg.text, msg.user_id)

    # --- outbound -------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return split_markdown(markdown, CHUNK_CHARS) if markdown.strip() else []

    async def deliver(self, out: OutboundMessage) -> str:
        address = out.address
        if address.private_to:
            return await self._send_private(out)
        if out.edit_of:
            stream = self._streams.get(out.edit_of)
            if stream is not None:
                return await self._continue_stream(out.edit_of, stream, out)
            return await self._edit(out)
        if not out.final:
            streamed = await self._start_stream(out)
            if streamed is not None:
                return streamed
        return await self._post(address, out.text)

    async def _with_markdown(
        self, call: Callable[..., Awaitable[Any]], markdown: str, **kwargs: Any
    ) -> Any:
        """Call a Web API method with `markdown_text`, or with mrkdwn `text` where Slack does
        not take Markdown (remembered for the rest of the run)."""
        if self._markdown_ok:
            try:
                return await call(markdown_text=markdown, **kwargs)
            except SlackApiError as exc:
                if _error(exc) not in MARKDOWN_REJECTED:
                    raise
                self._markdown_ok = False
                log.warning(
                    "slack: markdown_text was refused (%s); sending mrkdwn text from now on",
                    _error(exc),
                )
        return await call(text=to_mrkdwn(markdown), **kwargs)

    async def _post(self, address: Address, text: str) -> str:
        thread = {"thread_ts": address.thread_id} if address.thread_id else {}
        reply = await self._with_markdown(
            self.client.chat_postMessage, text, channel=address.chat_id, **thread
        )
        return str(reply["ts"])

    async def _edit(self, out: OutboundMessage) -> str:
        assert out.edit_of is not None
        try:
            await self._with_markdown(
                self.client.chat_update, out.text, channel=out.address.chat_id, ts=out.edit_of
            )
            return out.edit_of
        except SlackApiError as exc:
            if not out.final:
                raise
            # The preview is gone (deleted, or from a stream of a previous run): the reply
            # itself must still arrive.
            log.warning(
                "slack: could not edit %s (%s); posting the reply anew", out.edit_of, _error(exc)
            )
            return await self._post(out.address, out.text)

    def _stream_target(self, address: Address) -> dict[str, Any] | None:
        """chat.startStream arguments for `address`, or None to post-and-update instead."""
        if not (self._native_stream and self._markdown_ok and address.thread_id):
            return None
        target: dict[str, Any] = {"channel": address.chat_id, "thread_ts": address.thread_id}
        if address.chat_id.startswith("D"):
            return target
        recipient = self._recipients.get((address.chat_id, address.thread_id))
        if recipient is None:
            return None  # outside DMs Slack needs to know who the stream is for
        team, user = recipient
        return {**target, "recipient_team_id": team, "recipient_user_id": user}

    async def _start_stream(self, out: OutboundMessage) -> str | None:
        target = self._stream_target(out.address)
        if target is None:
            return None
        try:
            reply = await self.client.chat_startStream(markdown_text=out.text, **target)
        except SlackApiError as exc:
            if _error(exc) in FEATURE_UNAVAILABLE:
                self._native_stream = False
                log.warning(
                    "slack: native streaming unavailable (%s); using post-and-update",
                    _error(exc),
                )
            else:
                log.debug("slack: chat.startStream failed (%s); posting instead", _error(exc))
            return None
        ts = str(reply["ts"])
        self._streams.put(ts, _Stream(out.address.chat_id, out.text))
        return ts

    async def _continue_stream(self, ts: str, stream: _Stream, out: OutboundMessage) -> str:
        """Append a preview's new text to an open stream, or close it with the final text."""
        grows = out.text.startswith(stream.shown)
        delta = out.text[len(stream.shown) :] if grows else ""
        if not out.final:
            # A preview that rewrote earlier text cannot be streamed; the final fixes it.
            if grows and delta:
                await self.client.chat_appendStream(
                    channel=stream.channel, ts=ts, markdown_text=delta
                )
                stream.shown = out.text
            return ts
        self._streams.pop(ts)
        if grows:
            await self.client.chat_stopStream(
                channel=stream.channel, ts=ts, markdown_text=delta or None
            )
            return ts
        await self.client.chat_stopStream(channel=stream.channel, ts=ts)
        await self._with_markdown(self.client.chat_update, out.text, channel=stream.channel, ts=ts)
        return ts

    async def _send_private(self, out: OutboundMessage) -> str:
        """An answer only its asker sees: via the slash command's response_url while it is
        valid (it works even where the bot is not a member), else chat.postEphemeral."""
        address = out.address
        assert address.private_to is not None
        saved = self._response_urls.get((address.chat_id, address.private_to))
        if saved is not None and saved[1] > time.monotonic():
            webhook = AsyncWebhookClient(saved[0], session=self._session)
            try:
                response = await webhook.send(text=to_mrkdwn(out.text), response_type="ephemeral")
                status: object = response.status_code
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                status = exc
            if status == 200:
                return f"ephemeral:{next(self._ephemeral_ids)}"
            log.warning("slack: response_url failed (%s); using chat.postEphemeral", status)
        thread = {"thread_ts": address.thread_id} if address.thread_id else {}
        reply = await self._with_markdown(
            self.client.chat_postEphemeral,
            out.text,
            channel=address.chat_id,
            user=address.private_to,
            **thread,
        )
        return str(reply.get("message_ts") or f"ephemeral:{next(self._ephemeral_ids)}")

    # --- typing ---------------------------------------------------------------------------

    def _status_allowed(self, channel: str) -> bool:
        return "*" not in self._status_off and channel not in self._status_off

    async def typing(self, address: Address) -> None:
        """'is thinking…' under the thread where Slack offers it, else an hourglass reaction
        on the message being answered."""
        if address.private_to:
            return
        if address.thread_id and self._status_allowed(address.chat_id):
            try:
                await self.client.assistant_threads_setStatus(
                    channel_id=address.chat_id, thread_ts=address.thread_id, status=THINKING_STATUS
                )
                self._statuses.put((address.chat_id, address.thread_id), True)
                return
            except SlackApiError as exc:
                off = "*" if _error(exc) in FEATURE_UNAVAILABLE else address.chat_id
                self._status_off.add(off)
                log.info("slack: no thread status in %s (%s); using a reaction", off, _error(exc))
        target = (address.chat_id, address.reply_to or "")
        if not address.reply_to or target in self._reactions:
            return
        try:
            await self.client.reactions_add(
                channel=address.chat_id, timestamp=address.reply_to, name=TYPING_REACTION
            )
        except SlackApiError as exc:
            if _error(exc) != "already_reacted":
                raise
        self._reactions.put(target, True)

    async def done_typing(self, address: Address) -> None:
        if address.thread_id and self._statuses.pop((address.chat_id, address.thread_id)):
            await self.client.assistant_threads_setStatus(
                channel_id=address.chat_id, thread_ts=address.thread_id, status=""
            )
        if address.reply_to and self._reactions.pop((address.chat_id, address.reply_to)):
            await self.client.reactions_remove(
                channel=address.chat_id, timestamp=address.reply_to, name=TYPING_REACTION
            )


async def _nothing() -> list[str]:
    return []
