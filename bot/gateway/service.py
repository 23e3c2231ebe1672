"""`GatewayService`, the core as channel adapters meet it (`bot.channel_contract.Gateway`):
`accept` an inbound message, decide what it is (duplicate, refused, command, buffered group
chatter, or a message for the agent), record it durably, and queue it on its session's lane.

Each sender gets a small budget of command answers (refusals included) per minute, counted
across replicas; commands beyond it are recorded and logged but neither run nor answered.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Protocol

from bot.channel_contract import AcceptResult
from bot.commands import (
    LANE_COMMANDS,
    REPLIES,
    Command,
    addressed,
    authorized,
    parse_command,
    refusal,
)
from bot.gateway.budgets import COMMAND_REPLIES, COMMAND_WINDOW_SECONDS
from bot.gateway.history import person_history
from bot.gateway.lanes import MessageWork
from bot.gateway.leader import Leader
from bot.gateway.names import DisplayNames
from bot.gateway.recovery import recover
from bot.inbound import sanitize_inbound
from bot.media.prepare import problem_notice
from bot.sessions.keys import session_key
from bot.store.base import InboundStatus
from bot.store.budgets import BudgetName, SenderBudget
from bot.store.names import NameKey, NameKind
from bot.types import Address, ButtonPress, ChatType, HistoryLine, InboundMessage
from bot.wrong_tokens import WrongTokens

if TYPE_CHECKING:
    from bot.buttons.offers import Offers
    from bot.channel_contract import Leadership, PressAnswer
    from bot.config import Config
    from bot.gateway.admission import Admission
    from bot.gateway.lanes import Lanes
    from bot.gateway.presses import Presses
    from bot.gateway.replies import Replies
    from bot.gateway.session_commands import SessionCommands
    from bot.media.prepare import MediaPreparer
    from bot.metrics import Metrics
    from bot.store.base import InboundRow, Store

log = logging.getLogger(__name__)


class DeliveryWatch(Protocol):
    async def wait_delivered(self, address: Address) -> None:
        """Return once nothing for `address`'s chat waits to be sent right now."""


class ActivityObserver(Protocol):
    def note_activity(self, key: str) -> None:
        """A person's message was queued in `key` (the scheduler re-times its idle work)."""
        ...


class GatewayService:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        lanes: Lanes,
        admission: Admission,
        commands: SessionCommands,
        replies: Replies,
        delivered: DeliveryWatch,
        activity: ActivityObserver,
        metrics: Metrics,
        holder: str,
        offers: Offers,
        presses: Presses,
        media: MediaPreparer | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.lanes = lanes
        self.admission = admission
        self.commands = commands
        self.replies = replies
        self.delivered = delivered
        self.activity = activity
        self.metrics = metrics
        self.media = media
        self.offers = offers
        self.presses = presses
        self.holder = holder  # this replica's name on the leases it holds
        self.wrong_tokens = WrongTokens(store, BudgetName.CHAT_TOKENS)
        self.names = DisplayNames(store)
        self.bot_usernames: dict[str, str] = {}  # channel -> bot username, for /cmd@bot
        self.command_replies = SenderBudget(
            store, BudgetName.COMMANDS, limit=COMMAND_REPLIES, window=COMMAND_WINDOW_SECONDS
        )

    async def accept(self, msg: InboundMessage) -> AcceptResult:
        result = await self._accept(sanitize_inbound(msg))
        self.metrics.inbound_results.labels(msg.channel, result).inc()
        return result

    async def _accept(self, msg: InboundMessage) -> AcceptResult:
        key = session_key(msg, self.config.session)
        refused = await self.admission.refusal(msg, key)
        if refused is not None:
            return refused
        await self.names.seen(msg)
        command = parse_command(msg.text, self.bot_usernames.get(msg.channel, ""))
        if command is not None and addressed(msg):
            return await self._command(command, msg, key)
        buffered = await self.admission.buffered(msg, key)
        if buffered is not None:
            return buffered
        if self.media is not None and msg.attachments:
            # On disk, images prepared, before the row that refers to them is committed: the
            # turn, however often it is started, only reads what is made here.
            msg = dataclasses.replace(msg, attachments=await self.media.accept(msg.attachments))
        is_group = msg.chat_type != ChatType.DIRECT
        inbound_id, lines = await self.store.accept_inbound(
            msg.channel,
            msg.message_id,
            key,
            msg.to_json(),
            take_buffer=is_group,
            merge=self.admission.merge_buffer,
            buffer_key=await self.admission.buffer_key(msg, key),
        )
        if inbound_id is None:
            return AcceptResult.DUPLICATE
        if lines:
            msg = self.admission.with_buffer(msg, lines)
        self.metrics.messages_in.labels(msg.channel).inc()
        self.lanes.submit(key, MessageWork(inbound_id, msg))
        self.activity.note_activity(key)
        for att in msg.attachments:
            notice = problem_notice(att, self.config.media.max_bytes)
            if notice is not None:
                await self.replies.send_text(msg.address, notice)
        return AcceptResult.ACCEPTED

    async def _command(self, command: Command, msg: InboundMessage, key: str) -> AcceptResult:
        if not await self.store.mark_seen(msg.channel, msg.message_id, key, InboundStatus.COMMAND):
            return AcceptResult.DUPLICATE
        if not await self.command_replies.take(msg.principal):
            log.info(
                "ignoring /%s from %s in %s: over its command budget",
                command.name,
                msg.principal,
                key,
            )
            return AcceptResult.COMMAND
        shared_dm = self.config.session.dm_scope == "main"
        if not authorized(command, msg, admin=self.admission.is_admin(msg), shared_dm=shared_dm):
            log.info("refused /%s from %s in %s", command.name, msg.principal, key)
            await self.replies.send_text(msg.address, refusal(command, msg))
            return AcceptResult.COMMAND
        reply = REPLIES[command.name]

        async def answer() -> None:
            try:
                said = await reply(self.commands, command, msg, key)
            except Exception as exc:
                log.exception("/%s in %s failed", command.name, key)
                said = f"Sorry, that failed: {type(exc).__name__}."
            if isinstance(said, str):
                await self.replies.send_text(msg.address, said)
            else:
                await self.offers.offer(said, key, msg.address)

        if command.name in LANE_COMMANDS:
            # Queued behind the running turn, in order with later messages; the adapter
            # (e.g. a poller handling updates one by one) is not held up meanwhile.
            self.lanes.run_in_lane(key, answer)
        else:
            await answer()
        return AcceptResult.COMMAND

    async def recover(self, rows: list[InboundRow] | None = None) -> int:
        """Queue every accepted message that was not answered before the last stop: `rows`
        as read from the store before this process began accepting, else read now."""
        if rows is None:
            rows = await self.store.unfinished_inbound()
        return await recover(self.store, self.lanes, self.replies.channels, rows)

    async def press(self, press: ButtonPress) -> PressAnswer:
        return await self.presses.press(press)

    def register_bot_username(self, channel: str, username: str) -> None:
        self.bot_usernames[channel] = username

    def requires_mention(self, msg: InboundMessage) -> bool:
        return self.admission.requires_mention(msg)

    async def session_exists(self, msg: InboundMessage) -> bool:
        """Whether `msg`'s session has any history yet (e.g. to seed a new Slack thread)."""
        return await self.admission.session_exists(session_key(msg, self.config.session))

    async def wait_idle(self, msg: InboundMessage) -> None:
        await self.lanes.wait_idle(session_key(msg, self.config.session))
        await self.delivered.wait_delivered(msg.address)

    async def recent_history(self, msg: InboundMessage, limit: int) -> list[HistoryLine]:
        session = await self.store.current_session(session_key(msg, self.config.session))
        if session is None:
            return []
        entries = await self.store.transcript(session.session_id)
        return person_history(entries, msg.channel, msg.user_id)[-limit:]

    def leadership(self, name: str) -> Leadership:
        return Leader(self.store, name, holder=self.holder)

    async def remember(self, channel: str, key: str, value: str, seconds: float) -> None:
        now = time.time()
        await self.store.state_put(channel, key, value, expires_at=now + seconds, now=now)

    async def recall(self, channel: str, key: str) -> str | None:
        return await self.store.state_get(channel, key, now=time.time())

    async def chat_name(self, channel: str, chat_id: str, name: str) -> None:
        await self.names.note(NameKey(channel, NameKind.CHAT, chat_id), name)

    async def wrong_token(self, channel: str, client: str) -> float:
        return await self.wrong_tokens.count(f"{channel}:{client}")

    async def close(self) -> None:
        await self.lanes.close()
