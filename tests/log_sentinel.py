"""A sentinel for tests that wait on something a process logs (it took a lease, it found the
work already done) instead of sleeping and asserting that nothing happened."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def log_sentinel(logger: str, needle: str, level: int = logging.INFO) -> Iterator[asyncio.Event]:
    """An event set when `logger` logs, at `level` or above, a line containing `needle`."""
    seen = asyncio.Event()

    class Sentinel(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if needle in record.getMessage():
                seen.set()

    target = logging.getLogger(logger)
    handler, before = Sentinel(), target.level
    target.addHandler(handler)
    target.setLevel(level)
    try:
        yield seen
    finally:
        target.removeHandler(handler)
        target.setLevel(before)
