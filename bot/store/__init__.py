"""Persistence: the store interface and its SQLite implementation."""

from bot.store.base import Entry, EntryType, InboundStatus, Role, SessionRow, Store
from bot.store.sqlite import SQLiteStore

__all__ = ["Entry", "EntryType", "InboundStatus", "Role", "SQLiteStore", "SessionRow", "Store"]
