"""The result shape of `krill doctor` checks, shared by the doctor, the MCP manager and each
channel package's own check, so none of them imports another to report a result."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CheckStatus(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but degraded or not verified
    FAIL = "FAIL"  # would stop or degrade the service: `krill doctor` exits non-zero


# Short names for the call sites that build many checks.
OK, WARN, FAIL = CheckStatus.OK, CheckStatus.WARN, CheckStatus.FAIL

# Seconds a check may wait for a remote service before reporting it unreachable.
NETWORK_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: CheckStatus
    detail: str
