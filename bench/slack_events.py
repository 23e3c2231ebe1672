"""Slack Events API load: signed events into a real `krill run`, answered by an instant fake
model, replies caught by the fake Slack. Prints throughput, acknowledgement latency and the
time from event to chat.postMessage, and checks that every event got exactly one reply.

    /work/venv/bin/python bench/slack_events.py [--events 1000] [--conversations 200]

Conversations are half DMs and half channel threads (a top-level mention opens each thread,
later events reply in it). Events go out in rounds, one per conversation per round, so a
thread's root is in before its replies; `--duplicates` random events are then sent again
as Slack retries (X-Slack-Retry-Num) and must not be answered twice.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

# The fakes and the process helper live with the tests; make the repository importable
# when the script is run by path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.channel_env import slack_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack, post_event
from tests.krill_process import KrillProcess

TOKEN = re.compile(r"\[m(\d{5})\]")
ACK_DEADLINE_SECONDS = 3.0  # Slack retries an event it has not seen acknowledged by then


@dataclass
class Event:
    index: int
    payload: dict[str, Any]
    sent_at: float = 0.0


@dataclass
class Results:
    ack_latencies: list[float] = field(default_factory=list)
    bad_acks: list[int] = field(default_factory=list)
    ingest_seconds: float = 0.0
    total_seconds: float = 0.0


def conversations(fake: FakeSlack, count: int, per: int) -> list[list[Event]]:
    """`count` conversations of `per` events each: DMs, then threads in ten channels."""
    result: list[list[Event]] = []
    index = 0
    dms = count // 2
    for c in range(count):
        events: list[Event] = []
        root_ts: str | None = None
        for _ in range(per):
            text = f"question [m{index:05d}] please"
            if c < dms:
                payload = fake.im_message(f"U{c:04d}", text, channel=f"D{c:04d}")
            else:
                channel = f"C{(c - dms) % 10:02d}"
                payload = fake.app_mention(channel, f"U{c:04d}", text, thread_ts=root_ts)
                root_ts = root_ts or payload["event"]["ts"]
            events.append(Event(index, payload))
            index += 1
        result.append(events)
    return result


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


async def send_all(
    url: str, secret: str, rounds: list[list[Event]], concurrency: int, results: Results
) -> None:
    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one(event: Event, retry: int | None = None) -> None:
            async with limit:
                started = time.monotonic()
                if retry is None:
                    event.sent_at = started
                status, _ = await post_event(http, url, event.payload, secret, retry_num=retry)
                results.ack_latencies.append(time.monotonic() - started)
                if status != 200:
                    results.bad_acks.append(status)

        for batch in rounds:
            random.shuffle(batch)
            await asyncio.gather(*(one(e) for e in batch))


async def resend(url: str, secret: str, events: list[Event], results: Results) -> None:
    async with aiohttp.ClientSession() as http:
        for event in events:
            started = time.monotonic()
            status, _ = await post_event(http, url, event.payload, secret, retry_num=1)
            results.ack_latencies.append(time.monotonic() - started)
            if status != 200:
                results.bad_acks.append(status)


async def run(args: argparse.Namespace) -> int:
    random.seed(args.seed)
    posted: list[tuple[float, str]] = []
    async with FakeAnthropic() as model, FakeSlack() as slack:
        post_message = slack._methods["chat.postMessage"]

        def recording_post(params: dict[str, Any]) -> dict[str, Any]:
            posted.append((time.monotonic(), str(params.get("markdown_text") or "")))
            return post_message(params)

        slack._methods["chat.postMessage"] = recording_post
        per = max(1, args.events // args.conversations)
        convs = conversations(slack, args.conversations, per)
        events = [e for conv in convs for e in conv]
        rounds = [[conv[r] for conv in convs] for r in range(per)]
        config = {"slack": slack_section(slack), "memory": {"enabled": False}}
        env = {
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": model.url,
            "KRILL_LOG_LEVEL": "WARNING",
        }
        with tempfile.TemporaryDirectory() as tmp:
            async with KrillProcess(Path(tmp), config, env) as krill:
                url = f"{krill.url}/slack/events"
                results = Results()
                began = time.monotonic()
                await send_all(url, slack.signing_secret, rounds, args.concurrency, results)
                results.ingest_seconds = time.monotonic() - began
                duplicates = random.sample(events, min(args.duplicates, len(events)))
                await resend(url, slack.signing_secret, duplicates, results)
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline:
                    answered = {int(t) for _, text in posted for t in TOKEN.findall(text)}
                    if len(answered) >= len(events):
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.0)  # let any duplicate reply show itself
                results.total_seconds = max((t for t, _ in posted), default=began) - began
        model_calls = len(model.message_requests)
    return report(args, events, duplicates, posted, results, model_calls)


def report(
    args: argparse.Namespace,
    events: list[Event],
    duplicates: list[Event],
    posted: list[tuple[float, str]],
    results: Results,
    model_calls: int,
) -> int:
    replies_for: dict[int, list[float]] = {}
    for at, text in posted:
        for token in set(TOKEN.findall(text)):
            replies_for.setdefault(int(token), []).append(at)
    lost = [e.index for e in events if e.index not in replies_for]
    doubled = [i for i, times in replies_for.items() if len(times) > 1]
    to_post = [replies_for[e.index][0] - e.sent_at for e in events if e.index in replies_for]
    acks = results.ack_latencies
    rows = [
        ("events sent (unique)", f"{len(events)}"),
        ("retries sent (X-Slack-Retry-Num)", f"{len(duplicates)}"),
        ("conversations (DMs + threads)", f"{args.conversations}"),
        ("non-200 acknowledgements", f"{len(results.bad_acks)}"),
        ("ingest rate (events/s)", f"{len(events) / results.ingest_seconds:.0f}"),
        ("all replies posted after (s)", f"{results.total_seconds:.2f}"),
        ("reply rate (events answered/s)", f"{len(events) / results.total_seconds:.0f}"),
        ("ack latency p50 / p99 / max (ms)", _ms(acks)),
        ("event -> chat.postMessage p50 / p99 / max (ms)", _ms(to_post)),
        ("chat.postMessage calls", f"{len(posted)}"),
        ("model calls (queued messages merge)", f"{model_calls}"),
        ("events answered", f"{len(replies_for)}"),
        ("events lost (no reply)", f"{len(lost)}"),
        ("events answered twice", f"{len(doubled)}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\nSlack Events API bench ({len(events)} events, concurrency {args.concurrency})")
    print("-" * (width + 14))
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10}")
    print("-" * (width + 14))
    failures = []
    if results.bad_acks:
        failures.append(f"{len(results.bad_acks)} events were not acknowledged with 200")
    if lost:
        failures.append(f"{len(lost)} events got no reply (e.g. {lost[:5]})")
    if doubled:
        failures.append(f"{len(doubled)} events were answered twice (e.g. {doubled[:5]})")
    if percentile(acks, 0.99) >= ACK_DEADLINE_SECONDS:
        failures.append("ack latency p99 reached Slack's 3 s deadline")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("OK: every event acknowledged, answered exactly once")
    return 1 if failures else 0


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    return " / ".join(
        f"{v * 1000:.0f}"
        for v in (statistics.median(values), percentile(values, 0.99), max(values))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--duplicates", type=int, default=100, help="retries sent afterwards")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for replies")
    parser.add_argument("--seed", type=int, default=7)
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
