"""After a restart: queue every accepted message that was not answered before the stop,
resuming the turns that were running and starting turns for the messages still waiting.

While running, `Unattended` does the same for messages nobody is working on: older than a
lease, no work in this process's lane, and the session's lease free (a turn whose store
gave up, a process that died while another one runs on).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container

from bot.gateway.lanes import Lanes, MessageWork, ResumeWork, readable
from bot.store.base import InboundRow, InboundStatus, Store

log = logging.getLogger(__name__)


async def recover(
    store: Store, lanes: Lanes, channels: Container[str], rows: list[InboundRow]
) -> int:
    """Queue `rows` (as read from the store before this process began accepting) whose
    channel runs in this process; returns how many messages were queued."""
    resumed: dict[str, ResumeWork] = {}
    count = 0
    for row in rows:
        if row.channel not in channels:
            continue  # another process (e.g. `krill run`) owns that channel
        msg = await readable(store, row)
        if msg is None:
            continue
        count += 1
        if row.status == InboundStatus.PROCESSING and row.turn_id:
            turn = resumed.get(row.turn_id)
            if turn is None:
                turn = resumed[row.turn_id] = ResumeWork(row.turn_id)
                lanes.submit(row.session_key, turn)
            turn.inbound_ids.append(row.id)
            turn.messages.append(msg)
        else:
            lanes.submit(row.session_key, MessageWork(row.id, msg))
    if count:
        log.info("recovering %d accepted message(s) that were not answered", count)
    return count


class Unattended:
    def __init__(
        self,
        store: Store,
        lanes: Lanes,
        channels: Container[str],
        *,
        after: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.lanes = lanes
        self.channels = channels
        self.after = after  # seconds; a lease's length, so no live turn is mistaken
        self.clock = clock

    async def pick_up(self) -> int:
        """Queue the unanswered messages nobody is working on; returns how many."""
        now = self.clock()
        rows: list[InboundRow] = []
        for row in await self.store.unfinished_inbound():
            if row.received_at > now - self.after or self.lanes.busy(row.session_key):
                continue
            if await self.store.lease_holder(row.session_key, now) is None:
                rows.append(row)
        return await recover(self.store, self.lanes, self.channels, rows) if rows else 0
