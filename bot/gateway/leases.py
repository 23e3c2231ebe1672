"""Session leases as the lanes use them: work in a session's lane runs only while this
process holds the session's lease row in the store, so one turn at a time per session key
holds across every process sharing the store, not only within this one.

The lease is claimed before the work starts (waiting while another live process holds it),
renewed while the work runs, and released when it ends. A holder that died stops renewing,
and its lease is taken over once it expires (`storage.lease_seconds`). A process starting
on the same host as a dead holder (a restart after kill -9) need not wait that long: the
holder id names the host and process, so leases of a process that is gone are let go at
start-up.

A /stop may reach another process than the one running the session's turn: it leaves a stop
request in the store's shared state (`request_stop`), and the holder, checking at each
renewal, cancels a turn that began before the request, as a /stop of its own would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from bot.store.base import LeaseStore
from bot.store.shared_state import SharedStateStore

log = logging.getLogger(__name__)

# How often a waiting claim is tried again, at most; shorter leases are polled faster.
MAX_POLL_SECONDS = 1.0
STOP_REQUESTS = "stop"  # the shared-state scope of /stop requests, by session key
STOP_REQUEST_SECONDS = 300.0


class LeaseStateStore(LeaseStore, SharedStateStore, Protocol):
    """The leases and the shared state (where stop requests wait for the holder)."""


def new_holder_id() -> str:
    """This process's name on its leases: host:pid:random, unique per start."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def gone_from_this_host(holder: str) -> bool:
    """Whether `holder` was a process on this host that no longer runs. Unsure (another host,
    an id not made by `new_holder_id`, a live or foreign pid) means no: its lease expires."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, as another user's process
        return False
    return False


class SessionLeases:
    def __init__(
        self,
        store: LeaseStateStore,
        *,
        holder: str,
        seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.holder = holder
        self.seconds = seconds
        self.clock = clock

    async def release_dead(self) -> None:
        """At start-up: let go of the leases of processes on this host that are gone."""
        for holder in await self.store.lease_holders():
            if holder != self.holder and gone_from_this_host(holder):
                log.info("releasing the session leases of %s, which is no longer running", holder)
                await self.store.release_leases_of(holder)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Run the body while holding `key`'s lease."""
        await self._claim(key)
        work = asyncio.current_task()
        renewing = asyncio.create_task(self._renew(key, self.clock(), work), name=f"lease:{key}")
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            # Shielded: a /stop that cancelled the work must still give the session back.
            try:
                await asyncio.shield(self.store.release_lease(key, self.holder))
            except Exception:  # it expires on its own; the next claim takes it over
                log.warning("could not release the lease of %s", key, exc_info=True)

    async def _try(self, key: str) -> bool:
        now = self.clock()
        return await self.store.claim_lease(key, self.holder, now + self.seconds, now)

    async def _claim(self, key: str) -> None:
        poll = min(MAX_POLL_SECONDS, self.seconds / 4)
        waited = False
        while not await self._try(key):
            if not waited:
                holder = await self.store.lease_holder(key, self.clock())
                log.info("session %s is leased to %s; waiting for it", key, holder)
                waited = True
            await asyncio.sleep(poll)
        if waited:
            log.info("session %s: lease taken", key)

    async def _renew(self, key: str, began: float, work: asyncio.Task[Any] | None) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                if not await self._try(key):
                    # Stalled past the lease (a store locked for longer than it) and another
                    # process took the session over; the next claim waits for it.
                    log.warning("the lease of %s was taken over while its turn ran", key)
                asked = await self.store.state_get(STOP_REQUESTS, key, self.clock())
                if asked is not None and float(asked) >= began and work is not None:
                    log.info("session %s: stopping its running turn (/stop from elsewhere)", key)
                    work.cancel()
                    return
            except Exception:  # a renewal that fails is retried at the next interval
                log.warning("could not renew the lease of %s", key, exc_info=True)

    async def request_stop(self, key: str) -> None:
        """Ask whichever process runs `key`'s turn now to stop it."""
        now = self.clock()
        await self.store.state_put(
            STOP_REQUESTS, key, repr(now), expires_at=now + STOP_REQUEST_SECONDS, now=now
        )
