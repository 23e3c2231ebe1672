"""The Telegram channel: python-telegram-bot inside Krill's event loop, fed by long polling or
by the `/telegram/webhook` route, translating updates for the core and replies back.

Inbound, every update goes through `handle_update` -> `mapping` -> `core.accept`, which
returns only once the message is durably recorded; the webhook answers 200 and the poller
confirms the offset only after that. Outbound, `deliver` sends or edits one Markdown chunk as
text plus entities (no parse_mode, so nothing needs escaping), honouring flood control. Every
Bot API call has the connect, pool, write and read timeouts of `[telegram.timeouts]`; a send
whose answer does not come in time is an unknown outcome for the outbox, not a failure.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from dataclasses import replace

from aiohttp import web
from telegram import BotCommand, Message, MessageEntity, ReplyParameters, Update
from telegram.constants import ChatAction
from telegram.error import BadRequest, ChatMigrated, InvalidToken, NetworkError, TelegramError
from telegram.ext import ExtBot

from bot.backoff import Backoff
from bot.channel_contract import AcceptResult, Gateway, Leadership
from bot.commands import COMMANDS
from bot.errors import ConfigError, StartupError
from bot.types import Address, OutboundFile, OutboundMessage
from channels.telegram import files, media
from channels.telegram.albums import ALBUM_WAIT, Albums
from channels.telegram.buttons import LABEL_CHARS, answer_press, keyboard
from channels.telegram.calls import (
    classify,
    is_edit_target_gone,
    is_not_modified,
    is_parse_error,
    unconfirmed,
)
from channels.telegram.client import build_application
from channels.telegram.config import TelegramConfig
from channels.telegram.format import (
    plain_fallback,
    split_markdown,
    to_telegram,
    with_fitting_sources,
)
from channels.telegram.leading import LeadPolling
from channels.telegram.mapping import (
    ALLOWED_UPDATES,
    CHANNEL,
    BotIdentity,
    names_from,
    update_to_inbound,
)
from channels.telegram.pacing import PREVIEW
from channels.telegram.polling import STALE_AFTER
from channels.telegram.reactions import Reactions

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

TYPING_INTERVAL = 4.5  # Telegram shows "typing…" for about 5 s per sendChatAction
CONNECT_ATTEMPTS = 5  # getMe tries at start-up before giving up
CONNECT_BACKOFF = 1.0  # seconds, doubled per attempt
CONNECT_BACKOFF_CAP = 30.0


class TelegramChannel:
    """Implements `bot.channel_contract.Channel` for Telegram."""

    name = CHANNEL
    typing_interval = TYPING_INTERVAL
    button_label_chars = LABEL_CHARS

    def __init__(
        self,
        config: TelegramConfig,
        core: Gateway,
        *,
        leader: Leadership | None = None,
        names: tuple[str, ...] = (),
        stale_after: float = STALE_AFTER,
        media_max_bytes: int | None = None,
        album_wait: float = ALBUM_WAIT,
    ):
        self.config = config
        self._media_max_bytes = media_max_bytes  # None: files stay `[photo]` stand-ins
        self.stream_interval = config.stream_interval
        # Telegram cannot say whether a send that timed out arrived: the outbox sends it
        # again after waiting, or (the default) marks it maybe sent.
        self.resend_after_timeout = config.resend_after_timeout
        self._core = core
        self._albums = Albums(core.accept, album_wait)
        self._names = names  # extra names the bot answers to, e.g. from IDENTITY.md
        self._app = build_application(config)
        self._reactions = Reactions(
            self._app.bot, config.ack_reaction, config.done_reaction, memory=core
        )
        self.identity: BotIdentity | None = None
        # Polling mode: polls while holding `leader` (no lock: always), else stands by.
        self._polling = (
            LeadPolling(
                self._app.bot,
                self.handle_update,
                leader,
                stale_after=stale_after,
                redact=self._redact,
            )
            if config.mode == "polling"
            else None
        )
        self._connected = False
        # Groups upgraded to supergroups: old chat id -> new one, learned from ChatMigrated.
        self._migrated: dict[int, int] = {}

    @property
    def bot(self) -> ExtBot[str]:
        return self._app.bot

    # --- lifecycle --------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """For /healthz: in polling mode, whether getUpdates succeeded lately."""
        return self._polling is None or self._polling.healthy

    @property
    def failing_since(self) -> float | None:
        return None if self._polling is None else self._polling.failing_since

    @property
    def standby(self) -> bool:
        """For /healthz: polling mode, and another replica holds the polling lock."""
        return self._polling is not None and self._polling.standby

    async def start(self) -> None:
        await self._connect()
        await self._reactions.restore()
        await self._register_commands()
        if self._polling is None:
            await self._set_webhook()
        else:
            await self._polling.start()
            if self._polling.standby:
                log.info("Telegram: another replica polls for @%s; standing by", self.bot.username)

    async def stop(self) -> None:
        if self._polling is not None:
            await self._polling.stop()
        await self._albums.drain()
        await self._reactions.stop()
        if self._connected:  # start() may have failed before connecting
            await self._app.shutdown()
            self._connected = False

    async def _connect(self) -> None:
        """getMe, retried briefly if the Bot API is unreachable; a rejected token is fatal."""
        backoff = Backoff(CONNECT_BACKOFF, CONNECT_BACKOFF_CAP)
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                await self._app.initialize()
                self._connected = True
                break
            except InvalidToken as exc:
                raise ConfigError(
                    f"telegram.token: Telegram rejected the bot token ({self._redact(exc)}). "
                    "Copy it again from @BotFather, and check that telegram.api_base_url "
                    f"({self.config.api_base_url}) is a Bot API server."
                ) from None
            except NetworkError as exc:
                if attempt == CONNECT_ATTEMPTS:
                    raise StartupError(
                        f"telegram.api_base_url: cannot reach the Telegram Bot API at "
                        f"{self.config.api_base_url} after {attempt} attempts "
                        f"({self._redact(exc)}); check the address and the network."
                    ) from None
                delay = backoff.next()
                log.warning(
                    "cannot reach the Telegram Bot API at %s (%s); retrying in %.0fs "
                    "(attempt %d of %d)",
                    self.config.api_base_url,
                    self._redact(exc),
                    delay,
                    attempt,
                    CONNECT_ATTEMPTS,
                )
                await asyncio.sleep(delay)
        bot = self.bot
        self.identity = BotIdentity(
            bot.id, bot.username, names_from([bot.first_name, *self._names])
        )
        self._core.register_bot_username(CHANNEL, bot.username)
        log.info("Telegram: connected as @%s (id %d)", bot.username, bot.id)
        if not bot.can_read_all_group_messages:
            log.info(
                "Telegram: privacy mode is on for @%s, so in groups it only receives commands, "
                "@mentions and replies to it: unmentioned messages cannot be kept as context "
                "and require_mention=false has no effect. To change that, send /setprivacy to "
                "@BotFather (Disable) or make the bot a group admin.",
                bot.username,
            )

    async def _register_commands(self) -> None:
        commands = [BotCommand(name, description) for name, description in COMMANDS.items()]
        try:
            await self.bot.set_my_commands(commands)
        except TelegramError as exc:  # the menu is a convenience; commands work without it
            log.warning("Telegram: could not register the command menu: %s", self._redact(exc))

    async def _set_webhook(self) -> None:
        url = self.config.webhook_url
        if not url:
            log.info(
                "Telegram: webhook mode without telegram.webhook_url, so setWebhook is not "
                "called; point the bot's webhook at this server's %s yourself",
                WEBHOOK_PATH,
            )
            return
        try:
            await self.bot.set_webhook(
                url,
                secret_token=self.config.webhook_secret,
                allowed_updates=list(ALLOWED_UPDATES),
            )
        except TelegramError as exc:
            raise ConfigError(
                f"telegram.webhook_url: setWebhook for {url!r} failed: {self._redact(exc)}"
            ) from None
        log.info("Telegram: webhook set to %s", url)

    # --- inbound ----------------------------------------------------------------------

    async def handle_update(self, update: Update) -> AcceptResult | None:
        """Map one update and hand it to the core; returns the core's AcceptResult, or None
        when the update is not a message for the core. Raises if the core could not record
        it, so the caller lets Telegram deliver it again."""
        if self.identity is None:
            raise RuntimeError("Telegram channel is not connected yet")
        if update.callback_query is not None:
            await answer_press(self.bot, update.callback_query, self._core.press)
            return None
        try:
            msg = update_to_inbound(update, self.identity)
        except (AttributeError, KeyError, TypeError, ValueError):
            # A shape this code does not understand must not block the updates behind it.
            log.exception("skipping Telegram update %d that could not be read", update.update_id)
            return None
        if msg is None:
            log.debug("ignoring Telegram update %d (not a new message)", update.update_id)
            return None
        if self._media_max_bytes is not None and update.message is not None:
            msg = await media.attach(self.bot, update.message, msg, self._media_max_bytes)
        message = update.message
        if message is not None and message.media_group_id:
            # One album, one turn: this returns once the whole album is recorded.
            result, merged = await self._albums.add(message.media_group_id, msg)
            first = merged.message_id == msg.message_id
        else:
            result, first = await self._core.accept(msg), True
        if result == AcceptResult.ACCEPTED and message is not None and first:
            self._reactions.acknowledge(message.chat.id, msg.thread_id, message.message_id)
        return result

    def routes(self) -> list[web.RouteDef]:
        if self.config.mode != "webhook":
            return []
        return [web.post(WEBHOOK_PATH, self.webhook)]

    async def webhook(self, request: web.Request) -> web.Response:
        """POST /telegram/webhook: 200 only once the update is recorded; Telegram retries
        anything else, and the core's dedupe makes a retry harmless."""
        # aiohttp keeps bytes that are not UTF-8 as surrogates; they must mismatch, not raise.
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, self.config.webhook_secret.encode()):
            log.warning(
                "refused a Telegram webhook request from %s: missing or wrong %s header",
                request.remote,
                SECRET_HEADER,
            )
            return web.Response(status=403, text="forbidden")
        try:
            data = json.loads(await request.read())
        except (ValueError, RecursionError):  # RecursionError: nested thousands deep
            return web.Response(status=400, text="the body is not JSON")
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            return web.Response(status=400, text="the body is not a Telegram update")
        if self.identity is None:
            return web.Response(status=503, text="starting up; retry shortly")
        try:
            update = Update.de_json(data, self.bot)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            log.warning("refused a malformed Telegram update %s: %s", data["update_id"], exc)
            return web.Response(status=400, text="malformed update")
        try:
            await self.handle_update(update)
        except Exception:  # the store or core failed: not recorded, so let Telegram retry
            log.exception("could not record Telegram update %d; answering 500", update.update_id)
            return web.Response(status=500, text="not recorded; retry")
        return web.Response(status=200)

    # --- outbound ---------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return split_markdown(markdown)

    async def deliver(self, out: OutboundMessage) -> str:
        """Send one chunk, or edit `out.edit_of` in place; returns the Telegram message id.

        Tried once; a failure is raised as a classified `SendFailure` for the outbox.
        """
        try:
            try:
                return await self._deliver(out, self._chat(out.address))
            except ChatMigrated as exc:
                old = int(out.address.chat_id)
                self._migrated[old] = exc.new_chat_id
                log.info(
                    "Telegram group %d became supergroup %d; sending there", old, exc.new_chat_id
                )
                return await self._deliver(out, exc.new_chat_id)
        except TelegramError as exc:
            raise classify(exc, self._redact) from exc

    async def _deliver(self, out: OutboundMessage, chat_id: int) -> str:
        if out.sources:  # links at the end of the reply's last message
            out = replace(out, text=with_fitting_sources(out.text, out.sources))
        text, entities = to_telegram(out.text)
        if out.edit_of:
            message_id = int(out.edit_of)
            try:
                await self._edit(chat_id, message_id, out, (text, entities))
            except BadRequest as exc:
                if not (out.final and is_edit_target_gone(exc)):
                    raise
                log.info("Telegram preview %d is gone (%s); sending anew", message_id, exc.message)
                return await self._send(out, chat_id, text, entities)
            return str(message_id)
        return await self._send(out, chat_id, text, entities)

    async def _send(
        self, out: OutboundMessage, chat_id: int, text: str, entities: list[MessageEntity]
    ) -> str:
        address = out.address
        reply = None
        if address.reply_to and out.chunk_index == 0:
            # Quote the message being answered; still send if it was deleted meanwhile.
            reply = ReplyParameters(int(address.reply_to), allow_sending_without_reply=True)
        thread = int(address.thread_id) if address.thread_id else None
        pace = None if out.final else PREVIEW

        markup = keyboard(out.buttons) if out.buttons else None

        async def send(body: str, with_entities: list[MessageEntity] | None) -> Message:
            return await self.bot.send_message(
                chat_id,
                body,
                entities=with_entities,
                message_thread_id=thread,
                reply_parameters=reply,
                reply_markup=markup,
                rate_limit_args=pace,
            )

        try:
            sent = await send(text, entities)
        except BadRequest as exc:
            if not is_parse_error(exc):
                raise
            log.warning("Telegram refused a reply's formatting (%s); sending plain text", exc)
            sent = await send(plain_fallback(out.text, text), None)
        except TelegramError as exc:
            # A send that timed out is not repeated here, nor a plain failure if it reached
            # Telegram: the outbox settles it.
            failure = unconfirmed(exc, self.config.timeouts.read)
            if failure is None:
                raise
            raise failure from exc
        return str(sent.message_id)

    async def _edit(
        self,
        chat_id: int,
        message_id: int,
        out: OutboundMessage,
        converted: tuple[str, list[MessageEntity]],
    ) -> None:
        text, entities = converted
        pace = None if out.final else PREVIEW
        # Without a keyboard, the edit takes away the buttons the message had.
        markup = keyboard(out.buttons) if out.buttons else None

        async def edit(body: str, with_entities: list[MessageEntity] | None) -> None:
            await self.bot.edit_message_text(
                body,
                chat_id=chat_id,
                message_id=message_id,
                entities=with_entities,
                reply_markup=markup,
                rate_limit_args=pace,
            )

        try:
            await edit(text, entities)
        except BadRequest as exc:
            if is_not_modified(exc):
                return  # the message already shows exactly this
            if not is_parse_error(exc):
                raise
            log.warning("Telegram refused an edit's formatting (%s); using plain text", exc)
            try:
                await edit(plain_fallback(out.text, text), None)
            except BadRequest as again:
                if not is_not_modified(again):
                    raise

    async def typing(self, address: Address) -> None:
        thread = int(address.thread_id) if address.thread_id else None
        await self.bot.send_chat_action(
            self._chat(address), ChatAction.TYPING, message_thread_id=thread
        )

    async def done_typing(self, address: Address) -> None:
        # "typing…" stops by itself when the reply arrives; the acknowledgement does not.
        answered = int(address.reply_to) if address.reply_to else None
        await self._reactions.finish(int(address.chat_id), address.thread_id, answered)

    # --- helpers ----------------------------------------------------------------------

    async def send_file(self, address: Address, file: OutboundFile) -> str:
        """Upload one file, tried once; a failure is a classified `SendFailure` (an upload
        whose answer timed out, an unknown outcome)."""
        try:
            return await files.send_file(self.bot, self._chat(address), address, file)
        except TelegramError as exc:
            wait = self.config.timeouts.read
            raise (unconfirmed(exc, wait) or classify(exc, self._redact)) from exc

    def _chat(self, address: Address) -> int:
        chat_id = int(address.chat_id)
        return self._migrated.get(chat_id, chat_id)

    def _redact(self, exc: BaseException) -> str:
        """An exception's text, minus the bot token (URLs in errors may carry it)."""
        return str(exc).replace(self.config.token, "<token>") if self.config.token else str(exc)
