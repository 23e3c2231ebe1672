"""Who gets in: access checks with their refusals and pairing replies, and the buffering of
unmentioned group chatter that later rides along with the next mention (its photos too:
the newest `media.keep_images_turns` of them become images of the addressing turn).

A channel holds at most `MAX_PENDING_PAIRINGS` pending pairing requests, each valid for the
pairing TTL. When they are all taken, the oldest is dropped for the newcomer: a few
throwaway accounts cannot lock real people out of pairing, and the operator sees every
request (`krill pairing list`) and can deny one (`krill pairing deny`)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from bot.channel_contract import AcceptResult
from bot.gateway.budgets import REFUSAL_REPLIES, REFUSAL_WINDOW_SECONDS
from bot.sessions import access
from bot.sessions.keys import session_key
from bot.sessions.limits import requires_mention
from bot.store.base import BufferedLine, InboundStatus, Pairing, PairingStatus
from bot.store.budgets import BudgetName, SenderBudget
from bot.types import Attachment, ChatType, InboundMessage, MediaKind
from bot.untrusted import clean_name

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway.replies import Replies
    from bot.media.prepare import MediaPreparer
    from bot.store.base import Store

log = logging.getLogger(__name__)

# A refused person learns their id and what the owner can do; the log says the same.
DM_REFUSAL = (
    "Sorry, this assistant is private and you are not on its list of allowed users. Your "
    "{platform} id is {user_id}; if you should have access, ask its owner to {step} in "
    "krill.toml."
)
PAIRING_REPLY = (
    "Hi! This assistant needs the owner's approval first. Your {platform} id is {user_id} "
    "and your pairing code is {code} (valid for 1 hour). Ask the owner to run: "
    "krill pairing approve {channel} {code}"
)
PAIRING_DENIED = "Sorry, the owner declined your request. You can ask again later."


def warn_if_closed(config: Config, channels: Iterable[str]) -> None:
    """At start: say in the log when a channel would refuse everyone's DMs, the owner's too."""
    for channel in channels:
        policy = config.channel_policy(channel)
        if policy is None:
            continue
        found = access.reach(policy, channel, config.admin)
        if found is not access.Reach.DIRECT:
            log.warning("%s", access.reach_advice(channel, policy, found))


class Admission:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        replies: Replies,
        media: MediaPreparer | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.replies = replies
        self.media = media
        # Refusals and pairing codes each sender gets, so DM spam cannot make Krill spam back.
        self.refusal_replies = SenderBudget(
            store, BudgetName.REFUSALS, limit=REFUSAL_REPLIES, window=REFUSAL_WINDOW_SECONDS
        )

    def is_admin(self, msg: InboundMessage) -> bool:
        return access.is_admin(msg.principal, self.config.admin)

    async def refusal(self, msg: InboundMessage, key: str) -> AcceptResult | None:
        """None when `msg` may pass; else the `AcceptResult` of refusing it (the refusal or
        pairing reply, if any, is sent)."""
        policy = self.config.channel_policy(msg.channel)
        paired = False
        if policy and policy.dm_policy == "pairing" and msg.chat_type == ChatType.DIRECT:
            pairing = await self.store.pairing_get(msg.channel, msg.user_id)
            paired = pairing is not None and pairing.status == PairingStatus.APPROVED
        decision = access.check_access(msg, policy, is_admin=self.is_admin(msg), is_paired=paired)
        if decision.allowed:
            return None
        if not await self.store.mark_seen(msg.channel, msg.message_id, key, InboundStatus.REFUSED):
            return AcceptResult.DUPLICATE
        step = access.how_to_let_in(msg, policy)
        if decision.action == "deny":
            log.info(
                "refused %s (%s) in %s: %s; to let them in, %s in %s",
                msg.principal,
                msg.user_name or "no name",
                key,
                decision.reason,
                step,
                self.config.source or "krill.toml",
            )
        else:
            log.info("refused %s in %s: %s", msg.principal, key, decision.reason)
        if decision.action == "ignore":
            return AcceptResult.IGNORED
        if not await self.refusal_replies.take(msg.principal):
            log.info("not answering %s: its replies to refused messages are used up", msg.principal)
            return AcceptResult.REFUSED
        if decision.action == "pair":
            await self.replies.send_text(msg.address, await self._pairing_reply(msg))
        elif msg.chat_type == ChatType.DIRECT:
            await self.replies.send_text(
                msg.address,
                DM_REFUSAL.format(
                    platform=msg.channel.capitalize(),
                    user_id=msg.user_id,
                    step=step,
                ),
            )
        return AcceptResult.REFUSED

    async def _pairing_reply(self, msg: InboundMessage) -> str:
        now = time.time()
        existing = await self.store.pairing_get(msg.channel, msg.user_id)
        if existing and now - existing.created_at < access.PAIRING_TTL_SECONDS:
            if existing.status == PairingStatus.DENIED:
                return PAIRING_DENIED
            return self._pairing_code(msg, existing.code)
        pending = [
            p
            for p in await self.store.pairing_pending(msg.channel)
            if now - p.created_at < access.PAIRING_TTL_SECONDS
        ]
        # Oldest first (the store's order): those beyond the limit make room.
        for dropped in pending[: max(0, len(pending) - access.MAX_PENDING_PAIRINGS + 1)]:
            log.info(
                "pairing request of %s:%s dropped for a newer one", msg.channel, dropped.user_id
            )
            await self.store.pairing_delete(dropped.channel, dropped.user_id)
        code = access.new_pairing_code()
        await self.store.pairing_put(
            Pairing(msg.channel, msg.user_id, code, PairingStatus.PENDING, now, msg.user_name)
        )
        return self._pairing_code(msg, code)

    def _pairing_code(self, msg: InboundMessage, code: str) -> str:
        log.info(
            "pairing code %s for %s (%s); approve with: krill pairing approve %s %s",
            code,
            msg.principal,
            msg.user_name or "no name",
            msg.channel,
            code,
        )
        return PAIRING_REPLY.format(
            platform=msg.channel.capitalize(), user_id=msg.user_id, code=code, channel=msg.channel
        )

    def requires_mention(self, msg: InboundMessage) -> bool:
        return requires_mention(self.config.channel_policy(msg.channel), msg.chat_type, msg.chat_id)

    async def buffered(self, msg: InboundMessage, key: str) -> AcceptResult | None:
        """Keep unmentioned chatter in a group that needs a mention as context for later:
        the `AcceptResult` when `msg` was buffered (or was a duplicate), else None."""
        if msg.mentioned or not self.requires_mention(msg):
            return None
        policy = self.config.channel_policy(msg.channel)
        limit = policy.group_buffer_limit if policy is not None else 0
        line = None
        # A display name is the sender's own text: one clean line, so it cannot start a
        # line that reads as somebody else's message in the buffered context.
        sender = clean_name(msg.user_name or msg.user_id)
        if msg.attachments:
            kinds = {"image": "photo", "audio": "voice note"}
            kind = kinds.get(str(msg.attachments[0].kind), "file")
            text = f"[{kind} from {sender}: {msg.text.strip()}]"
            photos = await self._keep_photos(msg) if limit > 0 else []
            line = BufferedLine(sender, text, time.time(), photos)
        elif msg.text.strip():
            line = BufferedLine(sender, msg.text, time.time())
        if not await self.store.buffer_message(msg.channel, msg.message_id, key, line, limit=limit):
            return AcceptResult.DUPLICATE
        return AcceptResult.BUFFERED

    async def _keep_photos(self, msg: InboundMessage) -> list[Attachment]:
        """The photos of an unaddressed message, stored by hash for the next mention; other
        files are not kept (the chatter only notes that they were sent)."""
        if self.media is None or self.config.media.keep_images_turns <= 0:
            return []
        photos = [a for a in msg.attachments if a.kind == MediaKind.IMAGE and not a.error]
        # Prepared now, like an addressed message's: the later turn only reads them. One
        # that cannot be shown is left out, as nobody asked the bot about it.
        return [a for a in await self.media.accept(photos) if a.sha256 and not a.refused]

    def with_buffer(self, msg: InboundMessage, lines: list[BufferedLine]) -> InboundMessage:
        """`msg` with the buffered group lines before its own context, and the newest of
        their photos (at most `media.keep_images_turns`) before its own files."""
        keep = self.config.media.keep_images_turns
        photos = [a for line in lines for a in line.attachments]
        return dataclasses.replace(
            msg,
            context_lines=[f"{line.sender}: {line.text}" for line in lines] + msg.context_lines,
            attachments=(photos[-keep:] if keep > 0 else []) + msg.attachments,
        )

    def merge_buffer(self, payload: str, lines: list[BufferedLine]) -> str:
        """An inbound payload with the buffered group lines taken in (see `with_buffer`)."""
        return self.with_buffer(InboundMessage.from_json(payload), lines).to_json()

    async def buffer_key(self, msg: InboundMessage, key: str) -> str:
        """Whose buffered chatter a message takes: its own session's, except that a new
        channel thread (e.g. a Slack thread opened by a mention) starts with the chatter of
        the channel it was opened from, which is where unmentioned messages are kept."""
        if msg.chat_type != ChatType.CHANNEL or not msg.thread_id:
            return key
        if await self.session_exists(key):
            return key
        return session_key(dataclasses.replace(msg, thread_id=None), self.config.session)

    async def session_exists(self, key: str) -> bool:
        session = await self.store.current_session(key)
        return session is not None and session.turns > 0
