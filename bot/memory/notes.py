"""Appending to memory files: dated entries, never an overwrite, safe when sessions race.

Each append is one `write()` on a file opened with O_APPEND while holding an exclusive
`flock`, so entries from concurrent sessions (or processes) never interleave and the size
cap is checked against the file as it really is at that moment.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from bot.memory.paths import CURATED_FILE, MemoryPathError, in_view, resolve_memory_path
from bot.store.base import VisiblePaths

FILE_MODE = 0o644


class MemoryFull(Exception):
    """The target file has reached its size cap; the message says what to do instead."""


@dataclass(frozen=True, slots=True)
class Appended:
    path: str
    start_line: int
    end_line: int

    @property
    def source(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


def file_header(path: str, now: dt.datetime) -> str:
    """First lines of a memory file the append creates."""
    if path == CURATED_FILE:
        return "# Memory\n\n"
    return f"# {now:%Y-%m-%d}\n\n"


def format_entry(text: str, now: dt.datetime) -> str:
    """A Markdown list item stamped with the local date and time; continuation lines are
    indented so a multi-line entry stays one item."""
    lines = text.strip().splitlines() or [""]
    head = f"- [{now:%Y-%m-%d %H:%M}] {lines[0].strip()}"
    rest = [f"  {line.rstrip()}" if line.strip() else "" for line in lines[1:]]
    return "\n".join([head, *rest]) + "\n"


def append_entry(
    workspace: Path,
    target: str,
    text: str,
    *,
    now: dt.datetime,
    max_file_bytes: int,
    writable: VisiblePaths,
) -> Appended:
    """Append `text` as a dated entry to the memory file `target`.

    Blocking (file locks); call it from a worker thread. Raises MemoryPathError for a path
    outside memory or outside `writable` (checked for the file a link really is, too) and
    MemoryFull when the file would grow past `max_file_bytes`.
    """
    name, real = resolve_memory_path(workspace, target)
    if not in_view(writable, workspace, name, real):
        raise MemoryPathError(f"{name} belongs to another conversation's memory")
    real.parent.mkdir(parents=True, exist_ok=True)
    entry = format_entry(text, now)
    # O_NOFOLLOW: the path was resolved above, so a link appearing now is a swap, not a setup.
    fd = os.open(real, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        existing = real.read_bytes() if size else b""
        if size == 0:
            prefix = file_header(name, now)
        elif not existing.endswith(b"\n"):
            prefix = "\n"
        else:
            prefix = ""
        data = (prefix + entry).encode("utf-8")
        if size + len(data) > max_file_bytes:
            raise MemoryFull(
                f"{name} has reached its size limit ({max_file_bytes} bytes); nothing was "
                "written. Put the entry in today's daily note, or ask the operator to prune "
                f"{name}."
            )
        start_line = existing.count(b"\n") + prefix.count("\n") + 1
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)  # closing releases the lock
    return Appended(name, start_line, start_line + entry.count("\n") - 1)
