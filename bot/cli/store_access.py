"""How CLI commands reach the store: opened for one command and closed after it, with no
app, scheduler or channel around it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.config import Config
from bot.store.base import Store


async def with_store(config: Config, fn: Callable[[Store], Awaitable[int]]) -> int:
    """Run `fn` with the configured store open."""
    from bot.startup import open_store
    from bot.store.factory import store_for

    store = store_for(config)
    await open_store(store, config)
    try:
        return await fn(store)
    finally:
        await store.close()
