"""Reliability scorecard: crashes, faults, load and bad input against the real `krill run`.

Every scenario starts the real service with the loopback fakes of Telegram, Slack and the
Anthropic API (tests/fakes/) and drives it through the real channel endpoints:

- crash safety: a busy conversation over the Telegram webhook, Telegram long polling and
  Slack's Events API while the process is killed with SIGKILL at random moments and started
  again. Senders retry until acknowledged, as the platforms do. Afterwards every message must
  be answered exactly once, `PRAGMA integrity_check` and the memory index's FTS5 check must
  pass, and each restart must rebuild every scheduler job the store calls for.
- faults: model 429/529/500 bursts, a timeout, dropped streams and error events mid-reply;
  Telegram and Slack 429s and server errors on send; a read-only workspace and a full memory
  file for memory writes. Each must end in a retried success or a clear message, never both
  and never twice.
- load: many chats x many messages (200 x 20 by default) through the Telegram webhook and
  Slack's endpoint while the fake model answers after random delays: per-chat order kept,
  nothing lost or answered twice; the process's peak RSS is reported.
- platform pushes back: many chats through the Telegram webhook while the fake Telegram
  fails 5% of sends at random with a 5xx, and Krill is killed with SIGKILL half-way and
  started again. Every reply must arrive once (a duplicate only for a send in flight at the
  kill), in order; the delay from acknowledgement to delivery is reported (p50/p99).
- platform pushes back, real limits: many chats x many messages (200 x 20 by default; every
  tenth chat a group) through the Telegram webhook while the fake Bot API enforces
  Telegram's flood limits (1 a second per chat, 20 a minute per group, 30 a second overall,
  429 with retry_after beyond them). Reports the 429s Krill provoked (target 0) and the p50
  and p99 delay from acknowledgement to reply against the floor: the same replies sent by an
  ideal sender that waits only as long as the limits demand.
- bad input: forged and stale signatures, wrong secrets, malformed and oversized bodies,
  unknown update and event types, updates the Telegram library cannot parse (webhook and
  polling), huge messages, odd Unicode, lone surrogates and invalid UTF-8, the bot's own
  messages, edits and deletions. Each must get its defined outcome, and the process must
  stay up without logging a traceback.

Every message carries a token (`m<chat>x<seq>`); the fake model answers with the tokens of
the newest message(s) of its request, so each reply says exactly which messages it answers.

The pushback and limits rows also print where the delay goes (bench/delays.py): the p50,
p99 and mean of each part of a reply's way, from acknowledgement through the turn, the
outbox and the pacer to the platform.

Run: python bench/reliability.py [--quick] [--seed N] [--chats N --messages N]
     [--only crash|faults|load|pushback|limits|bad]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import logging
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import delays
from bench.proc_cpu import cpu_of
from tests.channel_env import (
    SECRET_HEADER,
    WEBHOOK_SECRET,
    ChannelKrill,
    channel_config,
)
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.slack import FakeSlack, sign
from tests.fakes.telegram import FakeTelegram
from tests.fs_faults import read_only
from tests.krill_process import KrillProcess

TOKEN_RE = re.compile(r"\bm(\d+)x(\d+)\b")
CHAT_BLOCK = '<<<UNTRUSTED source="chat"'
MAX_BODY = 1_048_576
DRAIN_SECONDS = 60.0  # how long answers may take to arrive once everything was sent
SETTLE_SECONDS = 0.5  # extra wait after the last answer, for duplicates to show up
# A reply the platform took this shortly before a kill may have gone out before Krill could
# record it in its outbox row; it is sent again after the restart (a duplicate beats a loss).
IN_FLIGHT_SECONDS = 0.5
LOG_RECORD_RE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.MULTILINE)
# python-telegram-bot's own report (with a traceback) of a batch it could not parse; Krill
# then reads that batch update by update and skips the broken one.
PTB_PARSE_ERROR = "Error while parsing updates"
FIRST_TELEGRAM_CHAT = 100_000


@dataclass
class Row:
    scenario: str
    sent: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    faults: int = 0
    faults_survived: int = 0
    bad: int = 0
    bad_refused: int = 0
    peak_rss_mb: float = 0.0
    in_flight: int = 0  # duplicates of replies that were in flight at a kill -9
    checks: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)  # where the delay goes

    @property
    def ok(self) -> bool:
        return (
            not self.failures
            and self.lost == 0
            and self.duplicated == self.in_flight
            and self.faults_survived == self.faults
            and self.bad_refused == self.bad
        )


# --- the fake model ---------------------------------------------------------------------------


def newest_chat_text(body: dict[str, Any]) -> str:
    """The newest chat block of a request: the message(s) this turn answers. Older failed
    turns merged into the same user message, and tool results, come before or after it."""
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        blocks = [{"text": content}] if isinstance(content, str) else content or []
        for block in reversed(blocks):
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and CHAT_BLOCK in text:
                return text
    return ""


def ack_handler(rng: random.Random, low: float, high: float) -> Callable[..., Awaitable[str]]:
    """A model that answers, after a random delay, with the tokens it was asked about."""

    async def handler(body: dict[str, Any]) -> str:
        if high > 0:
            await asyncio.sleep(rng.uniform(low, high))
        tokens = [f"m{c}x{s}" for c, s in TOKEN_RE.findall(newest_chat_text(body))]
        return "ack " + " ".join(tokens) if tokens else "ack"

    return handler


# --- fakes that note when each reply arrived ---------------------------------------------------


class TimedTelegram(FakeTelegram):
    def __init__(self) -> None:
        super().__init__()
        self.sends: list[tuple[float, str]] = []

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        result = super()._send_message(params)
        self.sends.append((time.monotonic(), str(params.get("text", ""))))
        return result


class TimedSlack(FakeSlack):
    def __init__(self) -> None:
        super().__init__()
        self.sends: list[tuple[float, str]] = []

    def _chat_post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        result = super()._chat_post_message(params)
        self.sends.append((time.monotonic(), str(params.get("markdown_text") or "")))
        return result


def in_flight_at_kill(token: str, sends: list[tuple[float, str]], kills: list[float]) -> bool:
    """Whether the first reply carrying `token` reached the platform just before a kill."""
    first = next((at for at, text in sends if re.search(rf"\b{token}\b", text)), None)
    return first is not None and any(0 <= k - first <= IN_FLIGHT_SECONDS for k in kills)


# --- helpers ----------------------------------------------------------------------------------


def peak_rss_mb(krill: KrillProcess) -> float:
    """The process's high-water resident set size (VmHWM), in MB."""
    if krill.proc is None or krill.proc.returncode is not None:
        return 0.0
    try:
        status = Path(f"/proc/{krill.proc.pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else 0.0


def tracebacks(log: str, allowed: tuple[str, ...] = ()) -> int:
    """Log records with a traceback, except those whose first line says one of `allowed`."""
    records = LOG_RECORD_RE.split(log)
    return sum(
        "Traceback" in record and not any(a in record.split("\n", 1)[0] for a in allowed)
        for record in records
    )


def db_path(directory: Path) -> Path:
    return directory / "data" / "krill.db"


def integrity(directory: Path) -> str:
    """`PRAGMA integrity_check` and the memory index's own FTS5 check, on a stopped store."""
    with contextlib.closing(sqlite3.connect(db_path(directory))) as db:
        result = db.execute("PRAGMA integrity_check").fetchone()[0]
        try:
            db.execute("INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')")
        except sqlite3.DatabaseError as exc:
            return f"memory index: {exc}"
    return str(result)


def expected_jobs(directory: Path) -> int:
    """Per-session scheduler jobs a start should rebuild: an idle memory flush for every
    current session with conversation since its last flush (no session here is large
    enough for idle compaction)."""
    with contextlib.closing(sqlite3.connect(db_path(directory))) as db:
        row = db.execute(
            "SELECT COUNT(*) FROM sessions WHERE is_current = 1 AND turns > 0"
            " AND last_activity_at IS NOT NULL AND last_model_call_at IS NOT NULL"
            " AND (memory_flush_at IS NULL OR memory_flush_at < last_activity_at)"
        ).fetchone()
    return int(row[0])


def cpu_seconds(krill: KrillProcess) -> float:
    """User + system CPU seconds the running process has used so far."""
    if krill.proc is None or krill.proc.returncode is not None:
        return 0.0
    try:
        return cpu_of(krill.proc.pid, children=False)[0]
    except OSError:
        return 0.0


async def rebuilt_jobs(krill: KrillProcess) -> int:
    async with asyncio.timeout(10):
        while True:
            found = re.search(r"scheduler: (\d+) job\(s\) rebuilt", krill.log())
            if found:
                return int(found.group(1))
            await asyncio.sleep(0.05)


def count_tokens(texts_by_chat: dict[str, list[str]]) -> tuple[dict[tuple[int, int], int], int]:
    """How often each token was answered, and how many chats saw tokens out of order."""
    counts: dict[tuple[int, int], int] = {}
    out_of_order = 0
    for texts in texts_by_chat.values():
        seqs: list[int] = []
        for text in texts:
            for chat, seq in TOKEN_RE.findall(text):
                key = (int(chat), int(seq))
                counts[key] = counts.get(key, 0) + 1
                seqs.append(int(seq))
        out_of_order += seqs != sorted(seqs)
    return counts, out_of_order


class Traffic:
    """Sends each chat's messages in order through one platform's real endpoint, retrying
    until acknowledged, and reads back what the bot answered."""

    def __init__(self, tg: FakeTelegram, slack: FakeSlack, url: str):
        self.tg = tg
        self.slack = slack
        self.url = url  # the running krill's; a restart keeps the port
        self.sent: set[tuple[int, int]] = set()
        self.telegram_chats: set[int] = set()
        self.slack_chats: set[str] = set()
        self.kills: list[float] = []  # when the process was killed (monotonic)

    def sends(self) -> list[tuple[float, str]]:
        """When each reply reached the fake platforms, if they keep time."""
        return sorted(getattr(self.tg, "sends", []) + getattr(self.slack, "sends", []))

    async def telegram(self, http: aiohttp.ClientSession, chat: int, seq: int) -> None:
        update = self.tg.private_message(FIRST_TELEGRAM_CHAT + chat, f"message m{chat}x{seq}")
        self.telegram_chats.add(FIRST_TELEGRAM_CHAT + chat)
        headers = {SECRET_HEADER: WEBHOOK_SECRET}
        await self._until_ok(http, "/telegram/webhook", json.dumps(update).encode(), headers)
        self.sent.add((chat, seq))

    def poll(self, chat: int, seq: int) -> None:
        self.telegram_chats.add(FIRST_TELEGRAM_CHAT + chat)
        self.tg.push_update(
            self.tg.private_message(FIRST_TELEGRAM_CHAT + chat, f"message m{chat}x{seq}")
        )
        self.sent.add((chat, seq))

    async def slack_dm(self, http: aiohttp.ClientSession, chat: int, seq: int) -> None:
        channel = f"D{chat:06d}"
        self.slack_chats.add(channel)
        event = self.slack.im_message(f"U{chat:06d}", f"message m{chat}x{seq}", channel=channel)
        body = json.dumps(event).encode()
        attempt = 0
        while True:
            # Signed afresh for each attempt, with Slack's retry headers after the first.
            headers = sign(self.slack.signing_secret, body) | {"Content-Type": "application/json"}
            if attempt:
                headers |= {"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "timeout"}
            if await self._post(http, "/slack/events", body, headers) == 200:
                break
            attempt += 1
            await asyncio.sleep(0.1)
        self.sent.add((chat, seq))

    async def _until_ok(
        self, http: aiohttp.ClientSession, path: str, body: bytes, headers: dict[str, str]
    ) -> None:
        headers = headers | {"Content-Type": "application/json"}
        while await self._post(http, path, body, headers) != 200:  # noqa: ASYNC110 (a retry)
            await asyncio.sleep(0.1)

    async def _post(
        self, http: aiohttp.ClientSession, path: str, body: bytes, headers: dict[str, str]
    ) -> int:
        try:
            async with http.post(self.url + path, data=body, headers=headers) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, OSError, TimeoutError):
            return 0  # down (killed, restarting): try again, as the platform would

    def replies(self) -> dict[str, list[str]]:
        texts: dict[str, list[str]] = {}
        for chat in self.telegram_chats:
            texts[f"tg{chat}"] = [m.get("text", "") for m in self.tg.bot_messages(chat)]
        for channel in self.slack_chats:
            texts[channel] = self.slack.posted_texts(channel)
        return texts

    async def drain(self, within: float = DRAIN_SECONDS) -> tuple[dict[tuple[int, int], int], int]:
        """Wait until every sent token is answered (or `within` passes); then count."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            counts, _ = count_tokens(self.replies())
            if self.sent <= counts.keys():
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(SETTLE_SECONDS)
        return count_tokens(self.replies())

    def score(self, row: Row, counts: dict[tuple[int, int], int], out_of_order: int) -> None:
        row.sent = len(self.sent)
        row.answered = sum(1 for key in self.sent if counts.get(key, 0) >= 1)
        row.lost = row.sent - row.answered
        twice = sorted(key for key in self.sent if counts.get(key, 0) > 1)
        row.duplicated = len(twice)
        unexplained = [
            f"m{c}x{s}"
            for c, s in twice
            if not in_flight_at_kill(f"m{c}x{s}", self.sends(), self.kills)
        ]
        row.in_flight = row.duplicated - len(unexplained)
        if unexplained:
            row.failures.append("answered twice: " + ", ".join(unexplained[:5]))
        if out_of_order:
            row.failures.append(f"{out_of_order} chat(s) answered out of order")


def session_for(http_limit: int = 40) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=http_limit),
        timeout=aiohttp.ClientTimeout(total=15),
    )


# --- crash safety -----------------------------------------------------------------------------


async def crash_scenario(mode: str, *, chats: int, messages: int, kills: int, seed: int) -> Row:
    rng = random.Random(seed)
    row = Row(f"crash: {mode}")
    telegram_mode = "polling" if mode == "telegram polling" else "webhook"
    async with TimedTelegram() as tg, TimedSlack() as slack, FakeAnthropic() as model:
        model.default_handler = ack_handler(rng, 0.05, 0.4)
        config = channel_config(tg, slack, telegram_mode=telegram_mode)
        env = model.env() | {"KRILL_LOG_LEVEL": "INFO"}
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            krill = await KrillProcess(directory, config, env).start()
            traffic = Traffic(tg, slack, krill.url)
            expected = rebuilt = 0

            async def chat_sender(http: aiohttp.ClientSession, chat: int) -> None:
                for seq in range(1, messages + 1):
                    await asyncio.sleep(rng.uniform(0.2, 1.0))
                    if mode == "telegram webhook":
                        await traffic.telegram(http, chat, seq)
                    elif mode == "telegram polling":
                        traffic.poll(chat, seq)
                    else:
                        await traffic.slack_dm(http, chat, seq)

            async def killer() -> KrillProcess:
                nonlocal expected, rebuilt, krill
                for _ in range(kills):
                    await asyncio.sleep(rng.uniform(0.4, 1.6))
                    await krill.kill()
                    traffic.kills.append(time.monotonic())
                    expected += expected_jobs(directory)
                    krill = await KrillProcess(directory, config, env).start()
                    rebuilt += await rebuilt_jobs(krill)
                return krill

            async with session_for() as http:
                senders = asyncio.gather(*(chat_sender(http, c) for c in range(chats)))
                krill = (await asyncio.gather(senders, killer()))[1]
            counts, disorder = await traffic.drain()
            traffic.score(row, counts, disorder)
            row.peak_rss_mb = peak_rss_mb(krill)
            if tracebacks(krill.log()):
                row.failures.append("the last run logged a traceback")
            await krill.stop()
            check = integrity(directory)
            row.checks += [
                f"{kills} x kill -9",
                *([f"{row.in_flight} dup. was in flight at a kill"] if row.in_flight else []),
                f"integrity {check}",
                f"jobs back {rebuilt}/{expected}",
            ]
            if check != "ok":
                row.failures.append(f"integrity check: {check}")
            if rebuilt != expected:
                row.failures.append(f"scheduler rebuilt {rebuilt} of {expected} jobs")
    return row


# --- faults -----------------------------------------------------------------------------------


@dataclass
class Fault:
    name: str
    kind: str  # model | channel | memory
    platform: str  # telegram | slack
    inject: Callable[[], None]
    expect: str  # "" = the real answer; else a phrase of the clear message the person gets
    tools: tuple[dict[str, Any], ...] = ()  # tool calls the model makes first


def quick_retry(model: FakeAnthropic, status: int, kind: str, message: str, times: int) -> None:
    model.queue_error(status, kind, message, headers={"retry-after-ms": "50"}, times=times)


def drop_twice(model: FakeAnthropic) -> None:
    model.queue_drop(10)
    model.queue_drop(10)


def faults(tg: FakeTelegram, slack: FakeSlack, model: FakeAnthropic) -> list[Fault]:
    def m(name: str, inject: Callable[[], None], expect: str = "") -> Fault:
        return Fault(name, "model", "telegram", inject, expect)

    return [
        m("429 x2", lambda: quick_retry(model, 429, "rate_limit_error", "slow down", 2)),
        m("529 x2", lambda: quick_retry(model, 529, "overloaded_error", "Overloaded", 2)),
        m("500 x2", lambda: quick_retry(model, 500, "api_error", "boom", 2)),
        m(
            "529 x3 (retries used up)",
            lambda: quick_retry(model, 529, "overloaded_error", "Overloaded", 3),
            "overloaded right now",
        ),
        m("timeout", lambda: model.queue(Reply.text("too late", delay=3.0))),
        m("stream dropped mid-reply", lambda: model.queue_drop(40)),
        m("error event mid-stream", lambda: model.queue_stream_error(after_chars=20)),
        m("stream dropped twice", lambda: drop_twice(model), "connection to the model broke off"),
        Fault(
            "Telegram 429 on send",
            "channel",
            "telegram",
            lambda: tg.fail_next("sendMessage", 429, retry_after=1),
            "",
        ),
        Fault(
            "Telegram 502 on send",
            "channel",
            "telegram",
            lambda: tg.fail_next("sendMessage", 502),
            "",
        ),
        Fault(
            "Telegram typing fails",
            "channel",
            "telegram",
            lambda: tg.fail_next("sendChatAction", 500, times=3),
            "",
        ),
        Fault(
            "Slack 429 on send",
            "channel",
            "slack",
            lambda: slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=1),
            "",
        ),
        Fault(
            "Slack 503 x2 on send",
            "channel",
            "slack",
            lambda: slack.fail_next("chat.postMessage", "internal_error", status=503, times=2),
            "",
        ),
        Fault(
            "read-only workspace",
            "memory",
            "telegram",
            lambda: None,
            "",
            ({"text": "Alice prefers tea"},),
        ),
        Fault(
            "memory file full",
            "memory",
            "slack",
            lambda: None,
            "",
            ({"text": "x" * 600},),
        ),
    ]


async def fault_scenarios(seed: int) -> list[Row]:
    rng = random.Random(seed)
    rows = {
        kind: Row(f"faults: {label}")
        for kind, label in (
            ("model", "model"),
            ("channel", "Telegram/Slack sends"),
            ("memory", "memory writes"),
        )
    }
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        model.default_handler = ack_handler(rng, 0.0, 0.05)
        config = channel_config(
            tg,
            slack,
            anthropic={"max_retries": 2, "timeout": 1.5},
            memory={"file_max_bytes": 400},
        )
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            krill = await KrillProcess(directory, config, model.env()).start()
            env = ChannelKrill(tg, slack, model, krill)
            workspace = directory / "workspace"
            traffic = Traffic(tg, slack, krill.url)
            async with session_for() as http:
                for n, fault in enumerate(faults(tg, slack, model), start=1):
                    row = rows[fault.kind]
                    row.faults += 1
                    row.sent += 1
                    fault.inject()
                    for args in fault.tools:
                        model.queue_tool_use("memory_append", args)
                    if fault.name == "read-only workspace":
                        with read_only(workspace, workspace / "memory") as locked:
                            if not locked:
                                row.failures.append("could not make the workspace read-only")
                            outcome = await one_fault(env, traffic, http, fault, n)
                    else:
                        outcome = await one_fault(env, traffic, http, fault, n)
                    replies, survived = outcome
                    row.answered += replies >= 1
                    row.lost += replies == 0
                    row.duplicated += replies > 1
                    if survived:
                        row.faults_survived += 1
                    else:
                        row.failures.append(fault.name)
            tool_errors = [
                r for r in model.message_requests if "nothing was written" in str(r.messages[-1])
            ]
            if not any("read-only" in str(r.messages[-1]) for r in tool_errors):
                rows["memory"].failures.append("no read-only tool error reached the model")
            if not any("size limit" in str(r.messages[-1]) for r in model.message_requests):
                rows["memory"].failures.append("no full-file tool error reached the model")
            for row in rows.values():
                row.peak_rss_mb = peak_rss_mb(krill)
            alive = krill.proc is not None and krill.proc.returncode is None
            await krill.stop()
            if not alive:
                rows["model"].failures.append("the process died")
    return list(rows.values())


async def one_fault(
    env: ChannelKrill, traffic: Traffic, http: aiohttp.ClientSession, fault: Fault, chat: int
) -> tuple[int, bool]:
    """Send one message with `fault` armed; returns (final replies, outcome as expected)."""
    chat += 5_000  # apart from other scenarios' chats
    if fault.platform == "telegram":
        await traffic.telegram(http, chat, 1)
        key = FIRST_TELEGRAM_CHAT + chat

        def texts() -> list[str]:
            return [m.get("text", "") for m in env.tg.bot_messages(key)]
    else:
        await traffic.slack_dm(http, chat, 1)
        channel = f"D{chat:06d}"

        def texts() -> list[str]:
            return env.slack.posted_texts(channel)

    wanted = fault.expect or f"m{chat}x1"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(wanted in t for t in texts()):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a second reply, if any, would come now
    replies = texts()
    return len(replies), len(replies) == 1 and wanted in replies[0]


# --- load -------------------------------------------------------------------------------------


async def load_scenario(*, chats: int, messages: int, seed: int) -> Row:
    rng = random.Random(seed)
    row = Row(f"load: {chats} chats x {messages}")
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        model.default_handler = ack_handler(rng, 0.0, 0.2)
        config = channel_config(tg, slack)
        env = model.env() | {"KRILL_LOG_LEVEL": "WARNING"}
        with tempfile.TemporaryDirectory() as tmp:
            krill = await KrillProcess(Path(tmp), config, env).start()
            traffic = Traffic(tg, slack, krill.url)
            rss = 0.0

            async def chat_sender(http: aiohttp.ClientSession, chat: int) -> None:
                for seq in range(1, messages + 1):
                    if chat % 2:
                        await traffic.slack_dm(http, chat, seq)
                    else:
                        await traffic.telegram(http, chat, seq)

            async def sample() -> None:
                nonlocal rss
                while True:
                    rss = max(rss, peak_rss_mb(krill))
                    await asyncio.sleep(0.5)

            started, cpu_before = time.monotonic(), cpu_seconds(krill)
            sampler = asyncio.create_task(sample())
            async with session_for() as http:
                await asyncio.gather(*(chat_sender(http, c) for c in range(chats)))
            acked = time.monotonic() - started
            counts, disorder = await traffic.drain(within=DRAIN_SECONDS * 2)
            answered_in = time.monotonic() - started - SETTLE_SECONDS
            sampler.cancel()
            traffic.score(row, counts, disorder)
            row.peak_rss_mb = max(rss, peak_rss_mb(krill))
            cpu = cpu_seconds(krill) - cpu_before
            if tracebacks(krill.log()):
                row.failures.append("a traceback was logged")
            await krill.stop()
            total = chats * messages
            row.checks += [
                "order kept" if not disorder else f"{disorder} chats out of order",
                f"{total / acked:.0f} msg/s acked",
                f"all answered in {answered_in:.1f} s ({total / answered_in:.0f}/s)",
                f"{cpu * 1000 / total:.2f} ms CPU per message",
            ]
    return row


# --- platform pushes back ---------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


async def pushback_scenario(*, chats: int, messages: int, failure_rate: float, seed: int) -> Row:
    """Replies through a Telegram that fails `failure_rate` of sends with 502, with one
    kill -9 half-way: the outbox must deliver each reply once, in order."""
    rng = random.Random(seed)
    row = Row(f"pushback: {failure_rate:.0%} 5xx + kill -9")
    stamps = delays.ModelStamps()
    async with TimedTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        model.default_handler = stamps.timed(ack_handler(rng, 0.0, 0.2))
        tg.fail_randomly("sendMessage", failure_rate, status=502, seed=seed)
        config = channel_config(tg, slack, logging=TIMED_LOG)
        env = model.env() | {"KRILL_LOG_LEVEL": "DEBUG"}
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            krill = await KrillProcess(directory, config, env).start()
            traffic = Traffic(tg, slack, krill.url)
            acked: dict[str, float] = {}
            total = chats * messages

            async def chat_sender(http: aiohttp.ClientSession, chat: int) -> None:
                for seq in range(1, messages + 1):
                    await traffic.telegram(http, chat, seq)
                    acked[f"m{chat}x{seq}"] = time.monotonic()
                    await asyncio.sleep(rng.uniform(0.0, 0.3))

            async def killer() -> None:
                nonlocal krill
                while len(acked) < total // 2:  # noqa: ASYNC110 - polling the traffic
                    await asyncio.sleep(0.05)
                await krill.kill()
                traffic.kills.append(time.monotonic())
                krill = await KrillProcess(directory, config, env).start()

            async with session_for() as http:
                await asyncio.gather(*(chat_sender(http, c) for c in range(chats)), killer())
            counts, disorder = await traffic.drain(within=DRAIN_SECONDS * 2)
            traffic.score(row, counts, disorder)
            waits = []
            for token, at in acked.items():
                first = next((t for t, text in tg.sends if re.search(rf"\b{token}\b", text)), None)
                if first is not None:
                    waits.append(max(0.0, first - at))
            if tracebacks(krill.log()):
                row.failures.append("the last run logged a traceback")
            await krill.stop()
            tokens = {tuple(map(int, TOKEN_RE.findall(t)[0])): at for t, at in acked.items()}
            row.parts = where_delay_goes(directory, tokens, tg.sends, stamps)
            row.checks += [
                "order kept" if not disorder else f"{disorder} chats out of order",
                *([f"{row.in_flight} dup. was in flight at the kill"] if row.in_flight else []),
                f"delivery p50 {percentile(waits, 0.5):.2f} s",
                f"p99 {percentile(waits, 0.99):.2f} s",
            ]
    return row


# --- platform pushes back: real limits ---------------------------------------------------------

# Every GROUP_EVERY-th chat of the real-limits run is a group (20 messages a minute), the
# rest are private chats (1 a second each); all share Telegram's 30 a second.
GROUP_EVERY = 10
FLOOD_CHAT_SECONDS = 1.0
FLOOD_GROUP = (20, 60.0)
FLOOD_OVERALL = (30, 1.0)


def fastest_schedule(replies: list[tuple[float, int, bool]]) -> list[float]:
    """When each reply could reach Telegram at the earliest under its flood limits.

    `replies` are (ready, chat, is_group) in the order Krill sent them: a reply is ready once
    the newest message it answers was acknowledged. One ideal sender takes, at each moment,
    the reply that may go soonest: so these are the lowest delays the limits allow for the
    replies Krill chose to send (merging waiting messages into one reply included).
    """
    by_chat: dict[int, list[int]] = {}
    for index, (_, chat, _) in enumerate(replies):
        by_chat.setdefault(chat, []).append(index)
    heap = [(replies[ids[0]][0], ids[0]) for ids in by_chat.values()]
    heapq.heapify(heap)
    position = {chat: 0 for chat in by_chat}
    overall: list[float] = []
    groups: dict[int, list[float]] = {}
    placed = [0.0] * len(replies)
    now = 0.0
    while heap:
        eligible, index = heapq.heappop(heap)
        _, chat, is_group = replies[index]
        at = max(eligible, now)
        blocked = at
        count, period = FLOOD_OVERALL
        if len(overall) >= count and overall[-count] > at - period:
            blocked = overall[-count] + period
        sent_here = groups.setdefault(chat, [])
        count, period = FLOOD_GROUP
        if is_group and len(sent_here) >= count and sent_here[-count] > at - period:
            blocked = max(blocked, sent_here[-count] + period)
        if blocked > at:
            heapq.heappush(heap, (blocked, index))
            continue
        placed[index] = now = at
        overall.append(at)
        sent_here.append(at)
        position[chat] += 1
        if position[chat] < len(by_chat[chat]):
            following = by_chat[chat][position[chat]]
            heapq.heappush(heap, (max(replies[following][0], at + FLOOD_CHAT_SECONDS), following))
    return placed


async def real_limits_scenario(*, chats: int, messages: int, seed: int) -> Row:
    """`chats` x `messages` through the Telegram webhook while the fake enforces Telegram's
    flood limits: nothing lost or doubled, no 429 provoked, delays against the floor."""
    rng = random.Random(seed)
    row = Row(f"real limits: {chats} chats x {messages}")
    stamps = delays.ModelStamps()
    async with TimedTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        flood = tg.enforce_flood_limits()
        model.default_handler = stamps.timed(ack_handler(rng, 0.0, 0.2))
        # Previews at the default pace, so they are paced too.
        config = channel_config(tg, slack, telegram={"stream_interval": 1.5}, logging=TIMED_LOG)
        env = model.env() | {"KRILL_LOG_LEVEL": "DEBUG"}
        with tempfile.TemporaryDirectory() as tmp:
            krill = await KrillProcess(Path(tmp), config, env).start()
            traffic = Traffic(tg, slack, krill.url)
            acked: dict[tuple[int, int], float] = {}

            async def chat_sender(http: aiohttp.ClientSession, chat: int) -> None:
                peer = FIRST_TELEGRAM_CHAT + chat
                for seq in range(1, messages + 1):
                    text = f"message m{chat}x{seq}"
                    if chat % GROUP_EVERY == 0:
                        update = tg.group_message(-peer, peer, text, mention=True)
                        traffic.telegram_chats.add(-peer)
                    else:
                        update = tg.private_message(peer, text)
                        traffic.telegram_chats.add(peer)
                    headers = {SECRET_HEADER: WEBHOOK_SECRET}
                    body = json.dumps(update).encode()
                    await traffic._until_ok(http, "/telegram/webhook", body, headers)
                    acked[(chat, seq)] = time.monotonic()
                    traffic.sent.add((chat, seq))

            async with session_for() as http:
                await asyncio.gather(*(chat_sender(http, c) for c in range(chats)))
            counts, disorder = await traffic.drain(within=DRAIN_SECONDS * 4)
            traffic.score(row, counts, disorder)
            if tracebacks(krill.log()):
                row.failures.append("a traceback was logged")
            await krill.stop()
            row.parts = where_delay_goes(Path(tmp), acked, tg.sends, stamps)
        score_delays(row, tg.sends, acked)
        row.checks.insert(0, f"{flood.refused} 429s provoked")
        if flood.refused:
            row.failures.append(f"Krill provoked {flood.refused} 429(s)")
    return row


# The service's DEBUG lines the breakdown of the delay reads, one JSON object a line.
TIMED_LOG = {"format": "json"}


def where_delay_goes(
    directory: Path,
    acked: dict[tuple[int, int], float],
    sends: list[tuple[float, str]],
    stamps: delays.ModelStamps,
) -> dict[str, list[float]]:
    log = delays.ServiceLog.read(directory)
    return delays.breakdown(acked, sends, stamps, log, delays.outbox_rows(db_path(directory)))


def score_delays(
    row: Row, sends: list[tuple[float, str]], acked: dict[tuple[int, int], float]
) -> None:
    """Delay from acknowledgement to the first reply naming each message, and the same for
    the fastest schedule the flood limits allow."""
    answered: list[tuple[float, list[tuple[int, int]]]] = []
    for at, text in sends:
        tokens = [(int(c), int(s)) for c, s in TOKEN_RE.findall(text)]
        tokens = [t for t in tokens if t in acked]
        if tokens:
            answered.append((at, tokens))
    floor = fastest_schedule(
        [
            (max(acked[t] for t in tokens), tokens[0][0], tokens[0][0] % GROUP_EVERY == 0)
            for _, tokens in answered
        ]
    )
    actual: dict[tuple[int, int], float] = {}
    best: dict[tuple[int, int], float] = {}
    for (at, tokens), placed in zip(answered, floor, strict=True):
        for token in tokens:
            actual.setdefault(token, at - acked[token])
            best.setdefault(token, placed - acked[token])
    delays, floors = list(actual.values()), list(best.values())
    row.checks += [
        f"{len(answered)} replies",
        f"delay p50 {percentile(delays, 0.5):.1f} s / p99 {percentile(delays, 0.99):.1f} s",
        f"floor p50 {percentile(floors, 0.5):.1f} s / p99 {percentile(floors, 0.99):.1f} s",
    ]


# --- bad input --------------------------------------------------------------------------------


BadCase = tuple[str, Callable[[], Awaitable[bool]]]


async def bad_input_scenario(seed: int) -> list[Row]:
    rng = random.Random(seed)
    rows = [Row("bad input: Telegram"), Row("bad input: Slack")]
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        model.default_handler = ack_handler(rng, 0.0, 0.0)
        with tempfile.TemporaryDirectory() as tmp:
            krill = await KrillProcess(Path(tmp), channel_config(tg, slack), model.env()).start()
            env = ChannelKrill(tg, slack, model, krill)
            for row, cases in zip(rows, (telegram_cases(env), slack_cases(env)), strict=True):
                await run_cases(row, cases, env)
            rows[0].peak_rss_mb = rows[1].peak_rss_mb = peak_rss_mb(krill)
            await krill.stop()
        # Polling: an update the library cannot parse must not stop the updates behind it.
        with tempfile.TemporaryDirectory() as tmp:
            config = channel_config(tg, slack, telegram_mode="polling")
            polling = await KrillProcess(Path(tmp), config, model.env()).start()
            env = ChannelKrill(tg, slack, model, polling)
            await run_cases(rows[0], polling_cases(env), env)
            await polling.stop()
    return rows


async def run_cases(row: Row, cases: list[BadCase], env: ChannelKrill) -> None:
    for name, case in cases:
        row.bad += 1
        try:
            ok = await case()
        except (AssertionError, TimeoutError) as exc:
            ok = False
            row.failures.append(f"{name}: {exc!r}")
        if ok:
            row.bad_refused += 1
        elif not any(f.startswith(name) for f in row.failures):
            row.failures.append(name)
    status, _ = await env.krill.get("/healthz")
    if status != 200 or tracebacks(env.krill.log(), allowed=(PTB_PARSE_ERROR,)):
        row.failures.append("the process was hurt (unhealthy or logged a traceback)")


def raw_json(payload: dict[str, Any], placeholder: str, raw: bytes) -> bytes:
    return json.dumps(payload).encode().replace(placeholder.encode(), raw)


def telegram_cases(env: ChannelKrill) -> list[BadCase]:
    tg = env.tg
    chat = iter(range(8_000, 9_000))

    async def status(body: bytes | dict[str, Any], want: int, secret: str | None = None) -> bool:
        return (await env.telegram(body, secret=secret))[0] == want

    async def ignored(update: dict[str, Any], chat_id: int, needle: str) -> bool:
        if not await status(update, 200):
            return False
        return await settled_without(env, chat_id, needle)

    async def answered(text: str, expect: str, raw: bytes | None = None) -> bool:
        chat_id = next(chat)
        update = tg.private_message(chat_id, text if raw is None else "PLACEHOLDER")
        body = raw_json(update, "PLACEHOLDER", raw) if raw is not None else update
        if not await status(body, 200):
            return False
        reply = await env.telegram_reply(chat_id, "ack", within=10)
        return expect in newest_chat_text(env.model.message_requests[-1].body) and bool(reply)

    def own_message() -> tuple[dict[str, Any], int]:
        chat_id = next(chat)
        update = tg.private_message(chat_id, "bot talking to itself")
        update["message"]["from"] = tg.bot_user
        return update, chat_id

    def edited() -> tuple[dict[str, Any], int]:
        chat_id = next(chat)
        return tg.edited_message(tg.private_message(chat_id, "typo"), "edit of a typo"), chat_id

    huge = "huge " + "y" * 300_000
    odd = "مرحبا \u202etxet\u202c zero\u200bwidth 👩\u200d👩\u200d👧 cafe\u0301"
    return [
        ("wrong secret -> 403", lambda: status(tg.private_message(1, "x"), 403, "wrong")),
        ("missing secret -> 403", lambda: status(tg.private_message(1, "x"), 403, "")),
        ("malformed JSON -> 400", lambda: status(b"{not json", 400)),
        ("JSON array -> 400", lambda: status(b"[1, 2]", 400)),
        ("invalid UTF-8 -> 400", lambda: status(b'{"update_id": 1, "x": "\xff\xfe"}', 400)),
        ("body over the cap -> 413", lambda: status(tg.private_message(1, "z" * MAX_BODY), 413)),
        (
            "unparseable update -> 400",
            lambda: status({"update_id": tg.next_update_id, "message": {"message_id": 1}}, 400),
        ),
        (
            "unknown update type -> ignored",
            lambda: ignored({"update_id": tg.next_update_id, "future_kind": {}}, 8_999, "future"),
        ),
        ("bot's own message -> ignored", lambda: ignored(*own_message(), "talking to itself")),
        ("edited message -> ignored", lambda: ignored(*edited(), "edit of a typo")),
        ("lone surrogate -> cleaned", lambda: answered("", "a \ufffd b", rb"a \ud800 b")),
        ("huge message -> cut", lambda: answered(huge, "message cut: it had 300,005")),
        ("odd Unicode -> intact", lambda: answered(odd, odd)),
    ]


def slack_cases(env: ChannelKrill) -> list[BadCase]:
    slack = env.slack
    channel = iter(f"D{n:06d}" for n in range(8_000, 9_000))

    async def status(payload: dict[str, Any] | None, want: int, **kw: Any) -> bool:
        return (await env.slack_event(payload, **kw))[0] == want

    async def unsigned() -> bool:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{env.krill.url}/slack/events", json={"type": "event_callback"}) as resp,
        ):
            return resp.status == 401

    async def ignored(payload: dict[str, Any], chan: str, needle: str) -> bool:
        if not await status(payload, 200):
            return False
        return await settled_without(env, chan, needle)

    async def answered(text: str, expect: str, raw: bytes | None = None) -> bool:
        chan = next(channel)
        event = slack.im_message(
            f"U{chan[1:]}", text if raw is None else "PLACEHOLDER", channel=chan
        )
        if raw is not None:
            ok = await status(None, 200, raw_body=raw_json(event, "PLACEHOLDER", raw))
        else:
            ok = await status(event, 200)
        if not ok:
            return False
        await env.slack_reply(chan, "ack", within=10)
        return expect in newest_chat_text(env.model.message_requests[-1].body)

    async def challenge() -> bool:
        status_code, body = await env.slack_event(slack.url_verification("c-123"))
        return status_code == 200 and "c-123" in body

    def own(kind: str) -> tuple[dict[str, Any], str, str]:
        chan = next(channel)
        if kind == "bot":
            event = slack.bot_message(chan, "own bot post", bot_id=slack.bot_id, channel_type="im")
        else:
            event = slack.im_message(slack.bot_user_id, "own user post", channel=chan)
        return event, chan, "own "

    def changed(kind: str) -> tuple[dict[str, Any], str, str]:
        chan = next(channel)
        ts = slack.im_message("U1", "original", channel=chan)["event"]["ts"]
        if kind == "edit":
            event = slack.message_changed(chan, ts, "edited post", channel_type="im")
        else:
            event = slack.message_deleted(chan, ts, channel_type="im")
        return event, chan, "edited post"

    dm = slack.im_message("U1", "x", channel="D1")
    huge = "huge " + "y" * 300_000
    odd = "שלום \u202etxet\u202c zero\u200bwidth 🏳️\u200d🌈 n\u0303"
    stale = int(time.time()) - 600
    return [
        ("forged signature -> 401", lambda: status(dm, 401, forge=True)),
        ("stale timestamp -> 401", lambda: status(dm, 401, timestamp=stale)),
        ("no signature -> 401", unsigned),
        ("malformed JSON -> 400", lambda: status(None, 400, raw_body=b"{not json")),
        ("invalid UTF-8 -> 400", lambda: status(None, 400, raw_body=b'{"type": "\xff"}')),
        ("body over the cap -> 413", lambda: status(None, 413, raw_body=b"x" * (MAX_BODY + 1))),
        ("url_verification -> challenge", challenge),
        (
            "unknown event type -> ignored",
            lambda: status(slack.event_callback({"type": "emoji_changed", "name": "x"}), 200),
        ),
        (
            "unknown request type -> 200",
            lambda: status({"type": "app_rate_limited", "team_id": "T1"}, 200),
        ),
        ("bot's own post -> ignored", lambda: ignored(*own("bot"))),
        ("bot's own user -> ignored", lambda: ignored(*own("user"))),
        ("edited message -> ignored", lambda: ignored(*changed("edit"))),
        ("deleted message -> ignored", lambda: ignored(*changed("delete"))),
        ("lone surrogate -> cleaned", lambda: answered("", "a \ufffd b", rb"a \udc00 b")),
        ("huge message -> cut", lambda: answered(huge, "message cut: it had 300,005")),
        ("odd Unicode -> intact", lambda: answered(odd, odd)),
    ]


def polling_cases(env: ChannelKrill) -> list[BadCase]:
    async def unparseable_then_normal() -> bool:
        chat = 9_500
        env.tg.push_update(
            {
                "update_id": env.tg.next_update_id,
                "message": {"message_id": 1, "chat": {"id": chat, "type": "private"}},
            }
        )
        env.tg.push_update(env.tg.private_message(chat, "after the broken one m9500x1"))
        return bool(await env.telegram_reply(chat, "m9500x1", within=15))

    return [("polling: unparseable update -> skipped", unparseable_then_normal)]


async def settled_without(env: ChannelKrill, chat: int | str, needle: str) -> bool:
    """Send a normal message to the same chat and wait for its answer: a chat's messages are
    handled in order, so by then the odd one was handled too. True if `needle` never
    reached the model."""
    if isinstance(chat, int):
        await env.telegram(env.tg.private_message(chat, f"follow-up m{chat}x1"))
        await env.telegram_reply(chat, f"m{chat}x1")
    else:
        token = f"m{int(chat[1:])}x1"
        event = env.slack.im_message(f"U{chat[1:]}", f"follow-up {token}", channel=chat)
        await env.slack_event(event)
        await env.slack_reply(chat, token)
    return not any(needle in r.last_user_text for r in env.model.message_requests)


# --- the table --------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    headers = [
        "scenario",
        "sent",
        "answered",
        "lost",
        "duplicated",
        "faults injected/survived",
        "bad inputs tried/refused cleanly",
        "peak RSS",
        "checks",
    ]
    lines = [
        [
            r.scenario + ("" if r.ok else " ✗"),
            str(r.sent) if r.sent else "-",
            str(r.answered) if r.sent else "-",
            str(r.lost) if r.sent else "-",
            str(r.duplicated) if r.sent else "-",
            f"{r.faults}/{r.faults_survived}" if r.faults else "-",
            f"{r.bad}/{r.bad_refused}" if r.bad else "-",
            f"{r.peak_rss_mb:.0f} MB" if r.peak_rss_mb else "-",
            " · ".join(r.checks) or "-",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
    return "\n".join(out)


SCENARIOS = ("crash", "faults", "load", "pushback", "limits", "bad")


async def run(
    quick: bool,
    seed: int,
    only: str | None = None,
    size: dict[str, int] | None = None,
) -> list[Row]:
    crash = (
        {"chats": 8, "messages": 6, "kills": 2}
        if quick
        else {"chats": 20, "messages": 10, "kills": 4}
    )
    load = {"chats": 50, "messages": 10} if quick else {"chats": 200, "messages": 20}
    pushback = {"chats": 20, "messages": 5} if quick else {"chats": 200, "messages": 20}
    load |= size or {}
    pushback |= size or {}
    wanted = set(SCENARIOS) if only is None else {only}
    rows: list[Row] = []
    if "crash" in wanted:
        for n, mode in enumerate(("telegram webhook", "telegram polling", "slack http")):
            rows.append(await crash_scenario(mode, seed=seed + n, **crash))
            print(f"  done: {rows[-1].scenario}", file=sys.stderr)
    if "faults" in wanted:
        rows += await fault_scenarios(seed)
        print("  done: faults", file=sys.stderr)
    if "load" in wanted:
        rows.append(await load_scenario(seed=seed, **load))
        print("  done: load", file=sys.stderr)
    if "pushback" in wanted:
        rows.append(await pushback_scenario(failure_rate=0.05, seed=seed, **pushback))
        print("  done: pushback", file=sys.stderr)
    if "limits" in wanted:
        rows.append(await real_limits_scenario(seed=seed, **pushback))
        print(f"  done: {rows[-1].scenario}", file=sys.stderr)
    if "bad" in wanted:
        rows += await bad_input_scenario(seed)
        print("  done: bad input", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller crash and load runs")
    parser.add_argument("--seed", type=int, default=7, help="random seed for timings")
    parser.add_argument("--only", choices=SCENARIOS, help="run one group of scenarios")
    parser.add_argument("--chats", type=int, help="chats of the load, pushback and limits rows")
    parser.add_argument("--messages", type=int, help="messages per chat in those rows")
    args = parser.parse_args()
    size = {
        name: value
        for name, value in (("chats", args.chats), ("messages", args.messages))
        if value is not None
    }
    # The fakes see requests cut off by kill -9 and client timeouts, which is the point;
    # aiohttp would print a traceback for each.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    started = time.monotonic()
    rows = asyncio.run(run(args.quick, args.seed, args.only, size))
    print(table(rows))
    for row in rows:
        if row.parts:
            print("\n" + delays.table(row.scenario, row.parts))
    print(f"\n{len(rows)} scenarios in {time.monotonic() - started:.0f} s (seed {args.seed})")
    failed = [r for r in rows if not r.ok]
    for row in failed:
        print(f"✗ {row.scenario}: {'; '.join(row.failures) or 'see the counts'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
