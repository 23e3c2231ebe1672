"""Persistence: the store interface and its SQLite implementation."""

from bot.store.base import InboundStatus, SessionRow, Store
from bot.store.sqlite import SQLiteStore

__all__ = ["InboundStatus", "SQLiteStore", "SessionRow", "Store"]
