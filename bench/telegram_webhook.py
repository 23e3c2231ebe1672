"""Benchmark: Telegram updates through the real webhook endpoint of a real `krill run`.

1,000 updates across 200 private chats are POSTed to /telegram/webhook over 40 concurrent
connections (Telegram's default max_connections), round-robin across chats, while the fake
model answers at once. Measured: how fast updates are acknowledged, how fast they are
answered, and the latency from posting an update to the `sendMessage` that answers it, as
the fake Bot API sees it. Every update carries a token; each must appear in exactly one sent
message (messages that arrive while a chat is busy are answered together in one reply).

`--rate N` paces the updates at N per second instead of sending them as fast as the
connections allow, to see the latency of a load Krill keeps up with rather than of a queue.

Streaming previews are off (`stream_interval = 0`): with a model that answers at once they
would only add an edit per reply.

Run: python bench/telegram_webhook.py [--updates 1000] [--chats 200] [--connections 40]
                                      [--rate 0]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.channel_env import SECRET_HEADER, WEBHOOK_SECRET, telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, free_port

TOKEN_RE = re.compile(r"\bu(\d+)x\b")
FIRST_CHAT = 10_000


class TimedTelegram(FakeTelegram):
    """The fake Bot API, also noting when each sendMessage arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at: list[tuple[float, str]] = []

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        result = super()._send_message(params)
        self.sent_at.append((time.perf_counter(), str(params.get("text", ""))))
        return result


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


async def run(updates: int, chats: int, connections: int, rate: float) -> dict[str, Any]:
    async with TimedTelegram() as tg, FakeAnthropic() as model:
        port = free_port()
        config = {
            "server": {"port": port},
            "anthropic": {"max_retries": 0},
            "telegram": telegram_section(tg, port=port),
        }
        env = model.env() | {"KRILL_LOG_LEVEL": "WARNING"}
        with tempfile.TemporaryDirectory() as tmp:
            async with KrillProcess(Path(tmp), config, env) as krill:
                return await drive(tg, krill.url, updates, chats, connections, rate)


async def drive(
    tg: TimedTelegram, base: str, updates: int, chats: int, connections: int, rate: float
) -> dict[str, Any]:
    # Round-robin across chats, so each chat's messages are spread over the run.
    bodies = [tg.private_message(FIRST_CHAT + n % chats, f"message u{n}x") for n in range(updates)]
    work: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
    for n, body in enumerate(bodies):
        work.put_nowait((n, body))
    posted_at: dict[int, float] = {}
    statuses: list[int] = []
    headers = {SECRET_HEADER: WEBHOOK_SECRET}
    url = f"{base}/telegram/webhook"

    async def sender(http: aiohttp.ClientSession) -> None:
        while not work.empty():
            n, body = work.get_nowait()
            if rate > 0:
                await asyncio.sleep(max(0.0, started + n / rate - time.perf_counter()))
            posted_at[n] = time.perf_counter()
            async with http.post(url, json=body, headers=headers) as resp:
                statuses.append(resp.status)

    connector = aiohttp.TCPConnector(limit=connections)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(*(sender(http) for _ in range(connections)))
    acked = time.perf_counter()

    answered: dict[int, list[float]] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answered = {}
        for at, text in list(tg.sent_at):
            for token in TOKEN_RE.findall(text):
                answered.setdefault(int(token), []).append(at)
        if len(answered) >= updates:
            break
        await asyncio.sleep(0.05)
    finished = max((at for at, _ in tg.sent_at), default=acked)
    await asyncio.sleep(0.5)  # anything sent after this point would be a duplicate
    answered = {}
    for at, text in list(tg.sent_at):
        for token in TOKEN_RE.findall(text):
            answered.setdefault(int(token), []).append(at)

    latencies = [(answered[n][0] - posted_at[n]) * 1000 for n in answered if n in posted_at]
    return {
        "updates": updates,
        "chats": chats,
        "connections": connections,
        "rate": rate,
        "http_200": sum(s == 200 for s in statuses),
        "ack_seconds": acked - started,
        "total_seconds": finished - started,
        "replies": len(tg.sent_at),
        "answered_once": sum(len(v) == 1 for v in answered.values()),
        "lost": updates - len(answered),
        "duplicated": sum(len(v) > 1 for v in answered.values()),
        "latencies_ms": latencies,
    }


def report(r: dict[str, Any]) -> None:
    lat = r["latencies_ms"] or [float("nan")]
    rows = [
        ("updates posted", f"{r['updates']} across {r['chats']} chats"),
        ("concurrent connections", str(r["connections"])),
        ("offered rate", f"{r['rate']:.0f} updates/s" if r["rate"] else "as fast as possible"),
        ("answered 200", str(r["http_200"])),
        ("acknowledged updates/s", f"{r['updates'] / r['ack_seconds']:.0f}"),
        ("answered updates/s", f"{r['updates'] / r['total_seconds']:.0f}"),
        ("sendMessage calls", str(r["replies"])),
        ("update -> sendMessage p50", f"{statistics.median(lat):.1f} ms"),
        ("update -> sendMessage p95", f"{percentile(lat, 95):.1f} ms"),
        ("update -> sendMessage p99", f"{percentile(lat, 99):.1f} ms"),
        ("updates answered exactly once", str(r["answered_once"])),
        ("lost", str(r["lost"])),
        ("duplicated", str(r["duplicated"])),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'metric':<{width}} | value")
    print(f"{'-' * width}-|-{'-' * 24}")
    for name, value in rows:
        print(f"{name:<{width}} | {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--rate", type=float, default=0.0, help="updates/s; 0 = no pacing")
    args = parser.parse_args()
    result = asyncio.run(run(args.updates, args.chats, args.connections, args.rate))
    report(result)
    assert result["http_200"] == args.updates, "some updates were not acknowledged"
    assert result["lost"] == 0, f"{result['lost']} update(s) never answered"
    assert result["duplicated"] == 0, f"{result['duplicated']} update(s) answered twice"


if __name__ == "__main__":
    main()
