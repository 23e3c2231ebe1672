"""The one place that turns `storage.url` into a store object."""

from __future__ import annotations

from bot.config import Config
from bot.store.base import Store
from bot.store.open_errors import masked_url
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore


def store_for(config: Config) -> Store:
    """The configured store, not yet opened."""
    if config.uses_postgres:
        return PostgresStore(
            config.storage.url,
            busy_wait=config.storage.busy_wait_seconds,
            connect_wait=config.storage.connect_wait_seconds,
        )
    return SQLiteStore(config.sqlite_path, busy_wait=config.storage.busy_wait_seconds)


def store_location(config: Config) -> str:
    """Where the store is, as `krill status` shows it: the SQLite file, or the PostgreSQL
    URL with its password masked."""
    if config.uses_postgres:
        return masked_url(config.storage.url)
    return str(config.sqlite_path)
