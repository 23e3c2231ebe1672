"""Where a reply's delay goes, for bench/reliability.py's pushback and limits rows.

Each message's delay (from the webhook's acknowledgement to the first reply naming its token
reaching the fake Telegram) is cut at the moments the service passes on the way:

- accepted → lane start: waiting in its chat's lane, behind the chat's earlier turn and for
  a turn slot; the session queue's DEBUG line "lane KEY: N item(s) start";
- lane start → turn start: the lane's work before the turn (the session's lease, the
  sender's turn budget, spending caps, reading the unanswered messages, the session);
  the turn's own DEBUG line;
- turn start → model call start → model call end: the fake model's own stamps;
- model call end → outbox row written: the outbox row's `created_at`;
- row written → claimed by the sender: the sender's DEBUG line "outbox row N claimed";
- claimed → pacer slot granted: the pacer's DEBUG line "slot for CHAT after S";
- slot → platform answer: the fake Telegram's receipt.

A send that failed and was retried counts its retries in "row written → claimed" (the claim
taken is the last one before the reply arrived). The service logs these lines only at DEBUG,
so the bench runs it with `KRILL_LOG_LEVEL=DEBUG` and JSON log lines.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import itertools
import json
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKEN_RE = re.compile(r"\bm(\d+)x(\d+)\b")
CLAIMED_RE = re.compile(r"^outbox row (\d+) claimed")
SLOT_RE = re.compile(r"^slot for (\S+) after")
LANE_RE = re.compile(r"^lane (\S+): \d+ item\(s\) start")
# `time.monotonic()` (the bench's stamps) to `time.time()` (the service's log and rows).
WALL = time.time() - time.monotonic()

PARTS = (
    "accepted → lane start",
    "lane start → turn start",
    "turn start → model call",
    "model call",
    "model answered → outbox row",
    "outbox row → claimed by the sender",
    "claimed → pacer slot",
    "pacer slot → platform",
)
TOTAL = "total: accepted → platform"

Token = tuple[int, int]


@dataclass
class ModelStamps:
    """When the fake model was asked for each reply text, and when it answered."""

    calls: dict[str, tuple[float, float]] = field(default_factory=dict)

    def timed(
        self, handler: Callable[[dict[str, Any]], Awaitable[str]]
    ) -> Callable[[dict[str, Any]], Awaitable[str]]:
        async def stamped(body: dict[str, Any]) -> str:
            asked = time.time()
            reply = await handler(body)
            self.calls[reply] = (asked, time.time())  # a repeated turn: its last call
            return reply

        return stamped


@dataclass
class ServiceLog:
    """The DEBUG lines of every start of the service: turn starts, claims and slots."""

    turn_start: dict[str, tuple[float, str]] = field(default_factory=dict)
    lanes: dict[str, list[float]] = field(default_factory=dict)
    claims: dict[int, list[float]] = field(default_factory=dict)
    slots: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def read(cls, directory: Path) -> ServiceLog:
        found = cls()
        for path in sorted(directory.glob("krill-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("level") != "DEBUG":
                    continue
                at = dt.datetime.fromisoformat(record["time"]).timestamp()
                message = str(record.get("message", ""))
                if record.get("logger") == "bot.agent.runner" and record.get("turn_id"):
                    key = str(record.get("session_key") or "")
                    found.turn_start.setdefault(record["turn_id"], (at, key))
                elif claimed := CLAIMED_RE.match(message):
                    found.claims.setdefault(int(claimed[1]), []).append(at)
                elif lane := LANE_RE.match(message):
                    found.lanes.setdefault(lane[1], []).append(at)
                elif slot := SLOT_RE.match(message):
                    found.slots.setdefault(slot[1], []).append(at)
        for stamps in (*found.claims.values(), *found.slots.values(), *found.lanes.values()):
            stamps.sort()
        return found


@dataclass(frozen=True)
class OutboxText:
    id: int
    turn_id: str
    chat_id: str
    text: str
    created_at: float


def outbox_rows(database: Path) -> list[OutboxText]:
    """The text rows of the outbox (a stopped store), oldest first."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute(
            "SELECT id, turn_id, chat_key, text, created_at FROM outbox"
            " WHERE kind = 'text' AND chunk_index >= 0 ORDER BY id"
        ).fetchall()
    return [
        OutboxText(int(i), str(t), str(key).split(":", 1)[1], str(text), float(at))
        for i, t, key, text, at in rows
    ]


def _last_before(stamps: list[float], moment: float) -> float | None:
    index = bisect.bisect_right(stamps, moment + 0.001)  # log times are cut to milliseconds
    return stamps[index - 1] if index else None


def breakdown(
    acked: dict[Token, float],
    sends: list[tuple[float, str]],
    model: ModelStamps,
    log: ServiceLog,
    rows: list[OutboxText],
) -> dict[str, list[float]]:
    """Each part's durations over the messages whose every moment was seen. `acked` and
    `sends` are in `time.monotonic()`, the rest in `time.time()`."""
    answered: dict[Token, float] = {}
    for at, text in sends:
        for chat, seq in TOKEN_RE.findall(text):
            answered.setdefault((int(chat), int(seq)), at + WALL)
    row_of: dict[Token, OutboxText] = {}
    for row in rows:
        for chat, seq in TOKEN_RE.findall(row.text):
            row_of.setdefault((int(chat), int(seq)), row)
    parts: dict[str, list[float]] = {part: [] for part in (*PARTS, TOTAL)}
    for token, accepted in acked.items():
        row = row_of.get(token)
        arrived = answered.get(token)
        if row is None or arrived is None:
            continue
        turn = log.turn_start.get(row.turn_id)
        call = model.calls.get(row.text)
        claimed = _last_before(log.claims.get(row.id, []), arrived)
        slot = _last_before(log.slots.get(row.chat_id, []), arrived)
        if turn is None or call is None or claimed is None or slot is None:
            continue
        started, key = turn
        lane = _last_before(log.lanes.get(key, []), started)
        if lane is None:
            continue
        moments = [accepted + WALL, lane, started, *call, row.created_at, claimed, slot, arrived]
        for part, (a, b) in zip(PARTS, itertools.pairwise(moments), strict=True):
            parts[part].append(max(0.0, b - a))
        parts[TOTAL].append(arrived - moments[0])
    return parts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def table(title: str, parts: dict[str, list[float]]) -> str:
    """p50, p99 and mean of each part (means add up to the mean delay; percentiles do not)."""
    seen = len(next(iter(parts.values()), []))
    lines = [
        f"{title}: where the delay goes ({seen} messages with every moment seen)",
        f"| {'part':<34} | p50 s  | p99 s  | mean s |",
        f"|{'-' * 36}|--------|--------|--------|",
    ]
    for part, values in parts.items():
        mean = sum(values) / len(values) if values else 0.0
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        lines.append(f"| {part:<34} | {p50:6.2f} | {p99:6.2f} | {mean:6.2f} |")
    return "\n".join(lines)
