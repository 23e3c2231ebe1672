"""The sender: one task that delivers outbox rows until the platform accepts them.

Each chat's rows go out one at a time in order (a later row waits behind an earlier one),
chats in parallel. Several processes may share one outbox: a row is claimed before it is
sent (a chat whose head another sender is sending is left alone), the claim is renewed while
the send lasts, and a sender that dies leaves its rows to the others once its claims
expire. Rows another process wrote are found by polling.

Flood control's delay is honoured whatever its length; server and network failures back off
exponentially with jitter; a permanent refusal marks the row dead and tells the person in
the reply's next chunk. State lives in the rows, so a restart picks up where the last run
stopped. A send whose outcome is unknown may have gone out and is never simply repeated: a
row found `sending` was in flight when its sender died, and one left `unconfirmed` got no
answer in time (the channel says how long to wait before deciding). Where the channel can
look its chunk id up (Slack), it is checked first; where it cannot (Telegram), a row cut
off by a crash is sent again, and one that timed out is, by the channel's choice, sent
again or set aside as "maybe sent" (counted and listed like dead rows). File rows (tool
`send_file`) go through the channel's `send_file`, with the same retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bot.backoff import backoff_delay
from bot.channel_contract import (
    FileChannel,
    MaybeSentChannel,
    SendFailure,
    SendFailureKind,
    SentLookupChannel,
)
from bot.store.outbox_rows import (
    OutboxKind,
    OutboxRow,
    OutboxStatus,
    OutboxSummary,
    outbox_chat_key,
)
from bot.types import Address, OutboundMessage

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.metrics import Metrics
    from bot.store.base import OutboxStore

log = logging.getLogger(__name__)

# Chats sent to at the same time; the rest wait their turn. A send waiting for its pacer
# slot counts too (a chat's 1 a second, a busy group's 20 a minute), so this is well above
# the chats a platform lets through in a second: chats waiting out their windows must not
# hold up replies to chats that may be sent to at once.
MAX_PARALLEL_CHATS = 256
# A failure the channel did not classify (a bug, an unexpected exception) is retried like a
# transient one, but not forever.
MAX_UNCLASSIFIED_ATTEMPTS = 10
SUMMARY_INTERVAL_SECONDS = 1.0  # how often the pending gauge and /status line are refreshed
STOP_GRACE_SECONDS = 5.0  # sends in flight at shutdown may finish within this
STORE_RETRY_SECONDS = 1.0  # a chat whose outcome could not be recorded waits this long
# A chunk the platform finds too long is cut in two and sent as two messages, down to this.
MIN_SPLIT_CHARS = 64
# A row in one of these states may have gone out: settled before it is sent again.
UNKNOWN_OUTCOME = (OutboxStatus.SENDING, OutboxStatus.UNCONFIRMED)
MAYBE_SENT_REASON = "sent but never confirmed in time; it may have arrived, so not sent again"


def chunk_id(row: OutboxRow, text: str) -> str:
    """Names one send: the text's checksum tells the parts of a re-split chunk apart."""
    return f"{row.turn_id}/{row.chunk_index}/{zlib.crc32(text.encode()):08x}"


def halves(text: str) -> tuple[str, str] | None:
    """`text` cut in two near its middle, at a line break or else a space (None when it is
    too short to be worth cutting)."""
    if len(text) < MIN_SPLIT_CHARS:
        return None
    middle = len(text) // 2
    cut = text.rfind("\n", 0, middle + 1)
    if cut < len(text) // 4:
        cut = text.rfind(" ", 0, middle + 1)
    if cut < len(text) // 4:
        cut = middle
    return text[:cut].rstrip(), text[cut:].lstrip()


def dead_notice(row: OutboxRow, reason: str) -> str:
    if row.chunk_count <= 1:
        return ""
    return f"⚠️ Part {row.chunk_index + 1} of {row.chunk_count} could not be delivered: {reason}\n\n"


def maybe_sent_notice(row: OutboxRow) -> str:
    if row.chunk_count <= 1:
        return ""
    return (
        f"⚠️ Part {row.chunk_index + 1} of {row.chunk_count} may be missing: it was sent but "
        "never confirmed.\n\n"
    )


class Sender:
    def __init__(
        self,
        *,
        store: OutboxStore,
        channels: Mapping[str, Channel],
        wakeup: asyncio.Event,
        metrics: Metrics,
        holder: str,
        claim_seconds: float = 15.0,
        poll_seconds: float = 1.0,
        gone: Callable[[str], bool] = lambda _holder: False,
        retry_first: float = 1.0,
        retry_cap: float = 300.0,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ):
        self.store = store
        self.channels = channels
        self.wakeup = wakeup
        self.metrics = metrics
        self.holder = holder  # this process's name on the rows it claims
        self.claim_seconds = claim_seconds
        self.poll_seconds = poll_seconds  # how often rows other processes wrote are looked for
        self.gone = gone  # whether a claimant is a process known to be gone
        self.retry_first = retry_first
        self.retry_cap = retry_cap
        self.clock = clock
        self.jitter = jitter
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        # chat key -> the id of its row in flight, until its outcome is recorded
        self._claimed: dict[str, int] = {}
        self._renewed_at = float("-inf")
        self._progress = asyncio.Event()  # set (and replaced) each time a send ends
        self._task: asyncio.Task[None] | None = None
        self._summary = OutboxSummary(0, 0, [])
        self._summary_at = float("-inf")

    async def start(self) -> None:
        await self._release_gone()
        self._task = asyncio.create_task(self._run(), name="outbox-sender")

    async def _release_gone(self) -> None:
        """Let go of the claims of senders known to be gone (a restart after kill -9 on this
        host), so their rows need not wait for the claims to expire."""
        try:
            for claimant in await self.store.outbox_claimants():
                if claimant != self.holder and self.gone(claimant):
                    log.info("releasing the outbox claims of %s, which is gone", claimant)
                    await self.store.outbox_release_claims(claimant)
        except Exception:  # they expire on their own
            log.warning("could not release the outbox claims of stopped processes", exc_info=True)

    async def stop(self) -> None:
        if self._task is None:
            return  # never started (start-up failed before it)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._in_flight:
            # A send cut off mid-call leaves its outcome unknown: let it finish if it can.
            _, late = await asyncio.wait(self._in_flight.values(), timeout=STOP_GRACE_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        try:  # what was cut off is left to the next sender (checked first where it can be)
            await self.store.outbox_release_claims(self.holder)
        except Exception:  # the claims expire on their own
            log.warning("could not release the outbox claims at shutdown", exc_info=True)

    async def _run(self) -> None:
        while True:
            self.wakeup.clear()
            try:
                due = await self.step()
            except Exception:  # e.g. the store is locked: look again shortly
                log.exception("the outbox sender could not read the outbox")
                due = self.clock() + 1.0
            # Woken at once by rows this process writes; others' rows are found by polling,
            # often enough to renew the claims of sends in flight.
            timeout = min(self.poll_seconds, self.claim_seconds / 3)
            if due is not None:
                timeout = min(timeout, max(0.0, due - self.clock()))
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
            # lands as the wakeup is set, and `stop` would then wait for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.wakeup.wait()

    async def step(self) -> float | None:
        """Claim and start sending every chat's due head row (as many as there is room for:
        the end of any send wakes the sender for the rest); returns when the next row not
        yet due will be (None: nothing waits but what is in flight here or elsewhere)."""
        channels = list(self.channels)
        now = self.clock()
        await self._renew(now)
        room = MAX_PARALLEL_CHATS - len(self._in_flight)
        claimed = await self.store.outbox_claim(
            channels, self.holder, now, now + self.claim_seconds, room
        )
        if claimed and not self._claimed:
            self._renewed_at = now  # nothing to renew before these claims need it
        for row in claimed:
            if row.chat_key in self._claimed:
                continue  # a claim that lapsed while its send went on: that send ends it
            # bench/reliability.py reads this line to tell where a reply's delay goes.
            log.debug("outbox row %d claimed for %s", row.id, row.chat_key)
            task = asyncio.create_task(self._deliver(row), name=f"outbox:{row.id}")
            self._in_flight[row.chat_key] = task
            self._claimed[row.chat_key] = row.id
            task.add_done_callback(functools.partial(self._done, row.chat_key))
        next_due = await self.store.outbox_next_due(channels, now)
        await self._refresh_summary(settled=not self._in_flight)
        return next_due

    async def _renew(self, now: float) -> None:
        """Extend the claims of the sends in flight, a third of a claim's time at most after
        the last renewal."""
        if not self._claimed or now - self._renewed_at < self.claim_seconds / 3:
            return
        try:
            await self.store.outbox_extend_claims(
                self.holder, list(self._claimed.values()), now + self.claim_seconds
            )
            self._renewed_at = now
        except Exception:  # tried again at the next step
            log.warning("could not renew the outbox claims", exc_info=True)

    async def settle(self) -> None:
        """Wait for every send in flight (tests step the sender by hand)."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def wait_delivered(self, address: Address) -> None:
        """Return once nothing for `address`'s chat is due now: every chunk sent, refused
        for good, or waiting for a later retry."""
        key = outbox_chat_key(address)
        while address.channel in self.channels:
            progress = self._progress
            heads = await self.store.outbox_heads([address.channel])
            head = next((row for row in heads if row.chat_key == key), None)
            if head is None or (key not in self._in_flight and head.next_attempt_at > self.clock()):
                return
            self.wakeup.set()
            # Another process may be the one sending it: look again after a poll.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(progress.wait(), self.poll_seconds)

    def _done(self, chat_key: str, task: asyncio.Task[None]) -> None:
        if self._in_flight.get(chat_key) is task:
            del self._in_flight[chat_key]
            self._claimed.pop(chat_key, None)
        self.wakeup.set()
        self._progress.set()
        self._progress = asyncio.Event()

    async def _deliver(self, row: OutboxRow) -> None:
        try:
            await self._attempt(row)
        except Exception:  # the store failed recording an outcome: the row is tried again
            log.exception("could not record the delivery of outbox row %d", row.id)
            await asyncio.sleep(STORE_RETRY_SECONDS)

    def _ending(self, row: OutboxRow) -> None:
        """Called before recording `row`'s outcome, which ends its claim: from then on the
        chat's next row (or this one, split) may be claimed and sent, also before this
        task has wound down."""
        if self._claimed.get(row.chat_key) == row.id:
            del self._claimed[row.chat_key]

    async def _attempt(self, row: OutboxRow) -> None:
        channel = self.channels[row.address.channel]
        text = row.notice + row.text
        out = OutboundMessage(
            row.address,
            text,
            row.turn_id,
            row.chunk_index,
            edit_of=row.edit_of,
            chunk_id=chunk_id(row, text),
            sources=row.sources,
            buttons=row.buttons,
        )
        if row.status in UNKNOWN_OUTCOME and await self._settled(channel, row, out):
            return
        if row.kind is OutboxKind.FILE:
            send = functools.partial(self._send_file, channel, row)
        else:
            send = functools.partial(channel.deliver, out)
        if not await self.store.outbox_mark_sending(row.id, self.holder, self.clock()):
            log.warning("outbox row %d: another sender took it over; leaving it", row.id)
            self._ending(row)
            return
        try:
            platform_id = await send()
        except SendFailure as exc:
            await self._failed(row, exc.kind, exc.reason, exc.retry_after)
            return
        except Exception as exc:
            kind = SendFailureKind.TRANSIENT
            if row.attempts + 1 >= MAX_UNCLASSIFIED_ATTEMPTS:
                kind = SendFailureKind.PERMANENT
            log.warning("outbox row %d: unexpected send failure", row.id, exc_info=True)
            await self._failed(row, kind, f"{type(exc).__name__}: {exc}", 0.0)
            return
        self._ending(row)
        await self.store.outbox_mark_sent(row.id, platform_id, self.clock())
        self.metrics.messages_out.labels(row.address.channel).inc()

    async def _send_file(self, channel: Channel, row: OutboxRow) -> str:
        """Upload a FILE row's file; an upload cut off by a crash is done again (no platform
        says whether a file arrived)."""
        if row.file is None or not isinstance(channel, FileChannel):
            raise SendFailure(SendFailureKind.PERMANENT, f"files cannot be sent on {channel.name}")
        if not await asyncio.to_thread(Path(row.file.path).is_file):
            raise SendFailure(SendFailureKind.PERMANENT, f"{row.file.name} is no longer there")
        return await channel.send_file(row.address, row.file)

    async def _settled(self, channel: Channel, row: OutboxRow, out: OutboundMessage) -> bool:
        """Whether a send that may have gone out needs no new one: found on the platform
        (where it can say), or, after a timeout the channel will not risk repeating, set
        aside as maybe sent."""
        if row.kind is OutboxKind.TEXT and isinstance(channel, SentLookupChannel):
            return await self._already_sent(channel, row, out)
        if row.status is OutboxStatus.SENDING or not isinstance(channel, MaybeSentChannel):
            return False  # cut off by a crash, or the channel has no say: send it again
        if channel.resend_after_timeout:
            return False  # the channel prefers a possible duplicate
        self._ending(row)
        log.warning(
            "outbox row %d (part %d of %d to %s) got no answer in time and may have arrived; "
            "marked maybe sent rather than sent again",
            row.id,
            row.chunk_index + 1,
            row.chunk_count,
            row.chat_key,
        )
        now = self.clock()
        await self.store.outbox_mark_dead(
            row.id, MAYBE_SENT_REASON, maybe_sent_notice(row), now, maybe_sent=True
        )
        self.metrics.outbox_maybe_sent.labels(row.address.channel).inc()
        return True

    async def _already_sent(
        self, channel: SentLookupChannel, row: OutboxRow, out: OutboundMessage
    ) -> bool:
        """Whether a send a crash or a timeout left unknown did go out, as the platform says."""
        try:
            found = await channel.find_sent(out)
        except Exception as exc:  # still unknown: ask again later, never send blind
            delay = self._backoff(row)
            log.warning("outbox row %d: could not check whether it went out (%s)", row.id, exc)
            now = self.clock()
            self._ending(row)
            await self.store.outbox_retry_at(row.id, now + delay, str(exc), now, unknown=True)
            return True
        if found is None:
            return False
        log.info("outbox row %d was delivered after all (%s)", row.id, found)
        self._ending(row)
        await self.store.outbox_mark_sent(row.id, found, self.clock())
        return True

    async def _failed(
        self, row: OutboxRow, kind: SendFailureKind, reason: str, retry_after: float
    ) -> None:
        self._ending(row)
        now = self.clock()
        text = row.notice + row.text
        if kind is SendFailureKind.TOO_LONG:
            parts = halves(text)
            if parts is not None:
                log.warning(
                    "outbox row %d is too long for %s; sending it in two", row.id, row.chat_key
                )
                await self.store.outbox_split(row.id, parts[0], parts[1], now)
                return
            kind = SendFailureKind.PERMANENT
        if kind is SendFailureKind.PERMANENT:
            log.warning(
                "outbox row %d (part %d of %d to %s) refused for good: %s",
                row.id,
                row.chunk_index + 1,
                row.chunk_count,
                row.chat_key,
                reason,
            )
            await self.store.outbox_mark_dead(row.id, reason, dead_notice(row, reason), now)
            self.metrics.outbox_dead.labels(row.address.channel).inc()
            return
        if kind is SendFailureKind.UNKNOWN:
            delay = retry_after or self._backoff(row)
            log.warning(
                "outbox row %d to %s: %s; it may have arrived, so it is settled in %.1fs "
                "before anything is sent again",
                row.id,
                row.chat_key,
                reason,
                delay,
            )
            await self.store.outbox_retry_at(row.id, now + delay, reason, now, unknown=True)
            return
        if kind is SendFailureKind.RETRY_AFTER:
            delay = retry_after
        else:
            delay = self._backoff(row)
        log.warning(
            "outbox row %d to %s not accepted (%s); retrying in %.1fs",
            row.id,
            row.chat_key,
            reason,
            delay,
        )
        await self.store.outbox_retry_at(row.id, now + delay, reason, now)

    def _backoff(self, row: OutboxRow) -> float:
        full = backoff_delay(row.attempts + 1, self.retry_first, self.retry_cap)
        return full * (0.5 + self.jitter() / 2)

    async def _refresh_summary(self, *, settled: bool) -> None:
        """Counted at most every SUMMARY_INTERVAL_SECONDS while sends are under way, and
        whenever they end, so /status never shows a stale backlog."""
        now = self.clock()
        if not settled and now - self._summary_at < SUMMARY_INTERVAL_SECONDS:
            return
        self._summary = await self.store.outbox_summary(dead_limit=0)
        self._summary_at = now
        self.metrics.outbox_pending.set(self._summary.pending)

    def status_line(self, key: str) -> str | None:
        """A /status line: replies still waiting to go out, chunks refused for good, and
        chunks maybe sent (never confirmed, not repeated)."""
        summary = self._summary
        if not (summary.pending or summary.dead or summary.maybe_sent):
            return None
        line = f"Outbox: {summary.pending} chunk(s) waiting · {summary.dead} refused for good"
        return line + (f" · {summary.maybe_sent} maybe sent" if summary.maybe_sent else "")
