"""Benchmark: the core's own time per turn, and throughput across concurrent sessions.

The fake model answers at once, so what is measured is Krill: accept -> store -> queue ->
history load -> prompt assembly -> (model) -> persist -> deliver, minus the model call
itself. Sessions are pre-filled with 10, 1,000 and 10,000 transcript entries behind a
compaction entry, as the context pipeline keeps a long-lived session; the point is that
loading history costs the same however long the transcript has grown.

Run: python bench/overhead.py [--turns 200] [--sessions 100]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.sessions.keys import conversation_of_key
from bot.transcript import AssistantReply, ChatLine, Compaction, Entry, PersonTurn
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

KEPT_ENTRIES = 20  # what a compacted session keeps verbatim


async def prefill(h: Harness, user: str, entries: int) -> None:
    store = h.app.store
    key = f"agent:main:local:direct:{user}"
    session = await store.get_or_create_session(key, conversation_of_key(key, "local"))
    batch: list[Entry] = []
    for i in range(entries // 2):
        line = ChatLine(f"m{i}", "local", user, f"old question {i}", timestamp=0)
        batch.append(Entry(session.session_id, PersonTurn([line])))
        answer = AssistantReply([{"type": "text", "text": f"old answer {i} " * 5}])
        batch.append(Entry(session.session_id, answer))
    for start in range(0, len(batch), 2000):
        await store.append_entries(batch[start : start + 2000])
    if len(batch) > KEPT_ENTRIES:
        first_kept = batch[-KEPT_ENTRIES].id
        await store.append_entries(
            [Entry(session.session_id, Compaction("## Decisions\n- none", first_kept, "bench"))]
        )
    # Prefill is not part of the steady state: fold its WAL into the database and keep its
    # objects out of the garbage collector's way.
    await store.db.fetch("PRAGMA wal_checkpoint(TRUNCATE)")
    gc.collect()
    gc.freeze()


def instrument(h: Harness, model_times: list[float]) -> None:
    """Record each model call's wall time so it can be subtracted from the turn's."""
    original = h.app.model.complete

    async def timed(**kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return await original(**kwargs)
        finally:
            model_times.append(time.perf_counter() - started)

    h.app.model.complete = timed  # type: ignore[method-assign]


async def sequential(fake: FakeAnthropic, entries: int, turns: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        # One sender sends every turn: its turn budget would make the later ones wait.
        toml = "[agent]\nsender_turns_per_minute = 0\n"
        async with Harness(Path(tmp), fake.url, toml) as h:
            await prefill(h, "bench", entries)
            model_times: list[float] = []
            instrument(h, model_times)
            overheads = []
            for i in range(turns):
                model_times.clear()
                started = time.perf_counter()
                await h.send(message(f"question {i}", user="bench"))
                total = time.perf_counter() - started
                overheads.append(total - sum(model_times))
                # The fake model runs in this process and records every request; left to
                # grow, that log makes the garbage collector pause turns that are not slow.
                fake.requests.clear()
            return overheads


async def concurrent(fake: FakeAnthropic, sessions: int, per_session: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        toml = f"[agent]\nmax_concurrent_turns = {sessions}\n"
        async with Harness(Path(tmp), fake.url, toml) as h:
            started = time.perf_counter()

            async def one(user: str) -> None:
                for i in range(per_session):
                    await h.send(message(f"hi {i}", user=user))

            await asyncio.gather(*(one(f"user{n}") for n in range(sessions)))
            elapsed = time.perf_counter() - started
            assert len(h.channel.finals) == sessions * per_session
            return sessions * per_session / elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    async with FakeAnthropic() as fake:
        fake.cache_enabled = False
        print(f"{'transcript entries':>18} | {'p50 ms':>7} | {'p99 ms':>7} | {'mean ms':>7}")
        print("-" * 48)
        p50s = {}
        for entries in (10, 1_000, 10_000):
            overheads = await sequential(fake, entries, args.turns)
            ms = [o * 1000 for o in overheads[5:]]  # skip warm-up
            p50s[entries] = pct(ms, 0.5)
            print(
                f"{entries:>18} | {pct(ms, 0.5):>7.2f} | {pct(ms, 0.99):>7.2f} | "
                f"{statistics.mean(ms):>7.2f}"
            )
        print(f"\ngrowth p50 10 -> 10,000 entries: {p50s[10_000] / p50s[10]:.2f}x")
        rate = await concurrent(fake, args.sessions, 5)
        print(f"throughput: {rate:.0f} turns/s across {args.sessions} concurrent local sessions")


if __name__ == "__main__":
    asyncio.run(main())
