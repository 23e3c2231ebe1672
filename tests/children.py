"""Krill processes a test started and left running: found in /proc among this process's
descendants, so the suite can fail the test that leaked one and stop it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def _command(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of `root`, parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
    found: list[int] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def is_krill(command: list[str]) -> bool:
    """`python -m bot.cli …` or `tests.pigeon` (how the tests start Krill) or a `krill`
    console script."""
    return (
        "bot.cli" in command
        or "tests.pigeon" in command
        or any(Path(part).name == "krill" for part in command[:2])
    )


def krill_children() -> dict[int, str]:
    """pid -> command line of every Krill process this process started, directly or not."""
    found = {}
    for pid in descendants(os.getpid()):
        command = _command(pid)
        if is_krill(command):
            found[pid] = " ".join(command)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and everything it started (children first: none is left orphaned)."""
    for child in reversed(descendants(pid)):
        _kill(child)
    _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
