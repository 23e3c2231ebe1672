"""CPU time of a process read from /proc/<pid>/stat, for the benchmarks' CPU figures: unlike
answered/s, the same on a busy machine as on a quiet one."""

from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int, *, children: bool = True) -> tuple[float, int]:
    """(user + system seconds, parent pid); with `children`, the seconds of the children it
    has waited for are added (a PostgreSQL postmaster's exited backends)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name in parentheses may hold spaces: the fields follow its last ")".
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = fields[11:15] if children else fields[11:13]
    return sum(int(v) for v in ticks) / CLOCK_TICKS, int(fields[1])
