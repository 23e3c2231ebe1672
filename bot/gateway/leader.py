"""Leader locks: work a platform lets only one client do at a time (Telegram long polling)
runs in exactly one of the replicas sharing the store.

A lock is a lease row under a reserved key (`leader:<name>`), claimed with the same
conditional upsert as the session leases, so it works on every store. The leader renews it
every `RENEW_SECONDS`; a replica waiting for it tries as often, and takes it over once a
dead leader's row expires (`LEADER_SECONDS` after its last renewal), so a new leader starts
within LEADER_SECONDS + RENEW_SECONDS (20 s) of the old one dying. A graceful stop releases
the row, and the next replica takes over at its next try.

A leader that cannot renew in time (the store is unreachable, or another replica already
took the row) counts itself as no longer leading before its row can expire, so its work
stops before another replica's starts: two leaders never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.store.base import LeaseStore

log = logging.getLogger(__name__)

LEADER_PREFIX = "leader:"  # session keys never start with it (they start with "agent:")
LEADER_SECONDS = 15.0
RENEW_SECONDS = 5.0


def leader_key(name: str) -> str:
    """The lease row's key for the leader lock `name` (e.g. "telegram:123456")."""
    return f"{LEADER_PREFIX}{name}"


class Leader:
    """One leader lock as this replica sees it (`bot.channel_contract.Leadership`)."""

    def __init__(
        self,
        store: LeaseStore,
        name: str,
        *,
        holder: str,
        seconds: float = LEADER_SECONDS,
        renew_every: float = RENEW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if renew_every * 2 > seconds:
            raise ValueError("a leader lock must be renewable at least twice before it expires")
        self.store = store
        self.key = leader_key(name)
        self.holder = holder
        self.seconds = seconds
        self.renew_every = renew_every
        self.clock = clock
        self._held_until = 0.0
        self._lost = asyncio.Event()
        self._renewing: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self._renewing is not None and not self._renewing.done()

    async def try_acquire(self) -> bool:
        """Claim the lock once; True when this replica leads now (and renews it from then on)."""
        if self.leading:
            return True
        now = self.clock()
        try:
            taken = await self.store.claim_lease(self.key, self.holder, now + self.seconds, now)
        except Exception as exc:  # the store is down: this replica cannot lead for now
            log.warning("could not claim the leader lock %s: %s", self.key, exc)
            return False
        if taken:
            self._held_until = now + self.seconds
            self._lost.clear()
            self._renewing = asyncio.create_task(self._renew(), name=f"leader:{self.key}")
            log.info("%s: this replica (%s) leads now", self.key, self.holder)
        return taken

    async def acquire(self) -> None:
        """Return once this replica leads, trying every `renew_every` seconds meanwhile."""
        first = True
        while not await self.try_acquire():
            if first:
                holder = await self._holder()
                log.info("%s is held by %s; standing by", self.key, holder or "another replica")
                first = False
            await asyncio.sleep(self.renew_every)

    async def lost(self) -> None:
        """Return once this replica, having led, no longer does (it must stop the work now)."""
        await self._lost.wait()

    async def release(self) -> None:
        """Stop leading and give the row up, so another replica takes over at once."""
        task, self._renewing = self._renewing, None
        if task is None:
            return
        if task.done():
            return  # leadership was lost already: the row is not ours to give up
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            await self.store.release_lease(self.key, self.holder)
        except Exception as exc:  # it expires on its own
            log.warning("could not release the leader lock %s: %s", self.key, exc)

    async def _holder(self) -> str | None:
        try:
            return await self.store.lease_holder(self.key, self.clock())
        except Exception:  # only for the log line
            return None

    async def _renew(self) -> None:
        try:
            while await self._renewed():
                pass
        finally:
            self._lost.set()

    async def _renewed(self) -> bool:
        """Wait one interval and renew; False once leadership is lost."""
        await asyncio.sleep(self.renew_every)
        # Give up one interval before the row could expire, whatever the store is doing, so
        # the work has stopped before any other replica may take the lock.
        deadline = self._held_until - self.renew_every
        now = self.clock()
        try:
            async with asyncio.timeout(max(0.0, deadline - now)):
                taken = await self.store.claim_lease(self.key, self.holder, now + self.seconds, now)
        except Exception as exc:  # TimeoutError included
            if self.clock() < deadline:
                log.warning("could not renew the leader lock %s (%r); retrying", self.key, exc)
                return True
            log.warning(
                "%s: could not renew the leader lock in time (%r); standing by", self.key, exc
            )
            return False
        if not taken:
            log.warning("%s: another replica took the leader lock over; standing by", self.key)
            return False
        self._held_until = now + self.seconds
        return True
