"""Starting a service's components in order and stopping them in reverse.

Each component registers its stop on an `AsyncExitStack` as it starts, so the stop order is
the start order reversed by construction, and `close` after a start that failed halfway
stops exactly what had started.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Lifespan:
    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        # The components started (or starting) so far, in start order.
        self.components: list[str] = []

    async def start(
        self,
        name: str,
        start: Callable[[], Awaitable[object]] | None,
        stop: Callable[[], Awaitable[object]],
    ) -> None:
        """Start one component (`start` None: it needs no start, only a stop). Its stop is
        registered before its start runs, so one that fails halfway is stopped too: every
        stop copes with a partial start."""
        self._stack.push_async_callback(_stop, name, stop)
        self.components.append(name)
        if start is not None:
            await start()

    async def close(self) -> None:
        """Stop every component started so far, the last started first; one whose stop
        fails is logged and the others still stop."""
        await self._stack.aclose()
        self.components.clear()


async def _stop(name: str, stop: Callable[[], Awaitable[object]]) -> None:
    log.debug("stopping %s", name)  # the last such line names a stop that hangs
    try:
        await stop()
    except Exception:
        log.exception("%s did not stop cleanly", name)
