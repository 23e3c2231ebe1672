"""The daily retention job: with `storage.retention_days` set, prune what the store keeps
only for dedupe, delivery bookkeeping or history (see `RetentionStore.prune_before`) once it
is older than that many days, then delete the received media no row refers to any more."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.store.base import Pruned, RetentionStore

log = logging.getLogger(__name__)

RETENTION_JOB = "retention"
RETENTION_INTERVAL_SECONDS = 86_400.0
SECONDS_PER_DAY = 86_400.0


class Swept(Protocol):
    @property
    def files(self) -> int: ...
    @property
    def size(self) -> int: ...


class MediaSweep(Protocol):
    """The media folder (`bot.media.files.MediaFiles`): deletes the files no row names."""

    def sweep(self, in_use: set[str]) -> Swept: ...


class Retention:
    def __init__(
        self,
        store: RetentionStore,
        days: float,
        *,
        clock: Callable[[], float],
        media: MediaSweep | None = None,
    ) -> None:
        self.store = store
        self.days = days
        self.clock = clock
        self.media = media

    @property
    def enabled(self) -> bool:
        return self.days > 0

    async def run(self) -> Pruned:
        """One pass: remove everything prunable last touched more than `days` ago."""
        pruned = await self.store.prune_before(self.clock() - self.days * SECONDS_PER_DAY)
        if pruned.total:
            log.info("retention: pruned rows older than %g day(s): %s", self.days, pruned)
        if self.media is not None:
            # Against the files' own times (the wall clock), not the pruning cutoff's clock.
            swept = self.media.sweep(await self.store.media_in_use())
            if swept.files:
                log.info(
                    "retention: deleted %d media file(s) no row refers to any more (%d bytes)",
                    swept.files,
                    swept.size,
                )
        return pruned
