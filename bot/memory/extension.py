"""Opens the memory index for a configuration (the service and the memory CLI commands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.memory.index import MemoryIndex

if TYPE_CHECKING:
    from bot.config import Config


def open_index(config: Config) -> MemoryIndex:
    """An index for this configuration (not yet opened; the store must have migrated)."""
    return MemoryIndex(config.sqlite_path, config.workspace_dir, config.memory)
