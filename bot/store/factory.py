"""The one place that turns `storage.url` into a store object."""

from __future__ import annotations

from typing import cast

from bot.config import Config
from bot.store.base import Store
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore


def store_for(config: Config) -> Store:
    """The configured store, not yet opened."""
    if config.uses_postgres:
        return cast(
            Store,
            PostgresStore(
                config.storage.url,
                busy_wait=config.storage.busy_wait_seconds,
                connect_wait=config.storage.connect_wait_seconds,
            ),
        )
    return SQLiteStore(config.sqlite_path, busy_wait=config.storage.busy_wait_seconds)
