"""Wires memory and the scheduler into a running App (listed in `bot.app.EXTENSIONS`).

Registers the memory tools, the per-turn recall, the flush hooks (before a turn, before
compaction, before /reset), and starts the scheduler, which also runs the heartbeat and
idle compaction when memory is turned off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.memory.flush import Flusher
from bot.memory.index import MemoryIndex
from bot.memory.recall import Recall
from bot.memory.tools import MemoryTools
from bot.scheduler import Scheduler

if TYPE_CHECKING:
    from bot.app import App
    from bot.config import Config
    from bot.store.base import MemoryIndexStore


def open_index(config: Config, store: MemoryIndexStore) -> MemoryIndex:
    """An index for this configuration (not yet opened; the store must be open)."""
    return MemoryIndex(store, config.workspace_dir, config.memory)


async def extension(app: App) -> Callable[[], Awaitable[None]]:
    config = app.config
    memory = config.memory
    index: MemoryIndex | None = None
    flusher: Flusher | None = None
    if memory.enabled:
        index = open_index(config, app.store)
        await index.open()
        MemoryTools(index, memory, config.agent.timezone).register(app.tools)
        if memory.search.recall:
            app.runner.recall = Recall(index, memory.search)
        if memory.flush.enabled:
            flusher = Flusher(config=config, store=app.store, runner=app.runner, core=app.core)
            app.runner.before_turn.append(flusher.before_turn)
            app.runner.before_compaction.append(flusher.before_compaction)
            app.core.before_reset = flusher.before_reset
    scheduler = Scheduler(
        config=config, store=app.store, core=app.core, flusher=flusher, index=index
    )
    app.runner.before_turn.append(scheduler.note_activity)
    app.core.status_lines.append(scheduler.status_line)
    await scheduler.start()

    async def stop() -> None:
        await scheduler.stop()

    return stop
