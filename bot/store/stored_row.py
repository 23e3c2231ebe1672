"""What a stored row is to the mapping code both stores share: an aiosqlite row and an
asyncpg record alike, read by position."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class StoredRow(Protocol):
    def __getitem__(self, index: int, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
