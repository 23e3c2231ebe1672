"""The last warnings and errors this process logged, kept in memory for the console's
Health page: the same records, redacted by the same filters, as the log output."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

KEPT = 50


@dataclass(frozen=True)
class LogEntry:
    at: float
    level: str
    logger: str
    message: str


class RecentProblems(logging.Handler):
    """A bounded handler for WARNING and above; `setup_logging` gives it the log output's
    filters, so what it keeps is exactly what the log shows."""

    def __init__(self, size: int = KEPT) -> None:
        super().__init__(logging.WARNING)
        self._entries: deque[LogEntry] = deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        entry = LogEntry(record.created, record.levelname, record.name, record.getMessage())
        self._entries.append(entry)

    def newest_first(self) -> list[LogEntry]:
        return list(reversed(self._entries))


def last_from(entries: list[LogEntry], package: str) -> LogEntry | None:
    """The newest of `entries` (newest first) logged by `package` or a module inside it."""
    return next(
        (e for e in entries if e.logger == package or e.logger.startswith(package + ".")), None
    )


# One per process, like the root logger it hangs from; the console reads it.
RECENT = RecentProblems()
