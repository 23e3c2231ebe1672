"""Progress of long CLI work (backup, restore, memory reindex) on a terminal: one line,
rewritten in place.

Nothing is written when stderr is not a terminal, so scripts and logs stay clean.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class TerminalProgress:
    """`progress(done, total)` callbacks for one labelled step; safe to call from a thread."""

    def __init__(self, label: str, out: TextIO | None = None):
        self.label = label
        self.out = out or sys.stderr
        self.shown = self.out.isatty()
        self._last = -1
        self._lock = threading.Lock()

    def __call__(self, done: int, total: int) -> None:
        if not self.shown:
            return
        percent = 100 * done // total if total else 100
        with self._lock:
            if percent != self._last:
                self._last = percent
                self.out.write(f"\r{self.label}: {percent}%")
                self.out.flush()

    def finish(self) -> None:
        if self.shown and self._last >= 0:
            self.out.write("\n")
            self.out.flush()
