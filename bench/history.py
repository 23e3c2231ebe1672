"""Benchmark: Krill's CPU per turn as one uncompacted conversation grows to 300 turns.

The fake model runs in its own process and answers at once, so the process CPU time
around each turn (`time.process_time`) is Krill's own work: accept, store, history load,
rendering the messages, the request, persisting and delivering the answer. The window is
large enough that nothing is compacted, so every turn carries the whole conversation; the
per-turn cost should follow what changed (one more turn), not the length of the history.

Turns slower than three times the median are listed with what ran during them (garbage
collections by generation), so a spike can be told from a periodic job.

Run: python bench/history.py [--turns 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.app_harness import Harness, message

ROOT = Path(__file__).resolve().parents[1]
# A person's message of ordinary length; the fake echoes it back as the answer.
TEXT = "question {i}: how would you plan the next step of the garden project, briefly?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def fake_model() -> AsyncIterator[str]:
    """The fake Anthropic API in its own process, so its CPU is not counted as Krill's."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.anthropic", "--port", str(port)),
        *("--chunk-delay", "0"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if b"listening" not in line:
            raise RuntimeError(f"the fake model did not start: {line!r}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        await proc.wait()


class GcWatch:
    """Counts garbage collections per generation and their time, per turn."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._started

    def take(self) -> tuple[list[int], float]:
        counts, seconds = self.counts, self.seconds
        self.counts, self.seconds = [0, 0, 0], 0.0
        return counts, seconds


async def run(
    turns: int, profile: cProfile.Profile | None, *, freeze: bool
) -> tuple[list[float], list[tuple[list[int], float]]]:
    async with fake_model() as url:
        with tempfile.TemporaryDirectory() as tmp:
            # One sender sends every turn: its turn budget would make the later ones wait.
            toml = "[agent]\nsender_turns_per_minute = 0\n"
            async with Harness(Path(tmp), url, toml) as h:
                if freeze:
                    gc.freeze()  # as `krill run` does once the service has started
                watch = GcWatch()
                gc.callbacks.append(watch)
                cpu: list[float] = []
                collections = []
                try:
                    for i in range(turns):
                        if profile is not None and i == turns - turns // 6:
                            profile.enable()
                        watch.take()
                        started = time.process_time()
                        await h.send(message(TEXT.format(i=i), user="bench"))
                        cpu.append(time.process_time() - started)
                        collections.append(watch.take())
                finally:
                    gc.callbacks.remove(watch)
                    if profile is not None:
                        profile.disable()
                assert len(h.channel.finals) == turns, "every turn is answered"
                return cpu, collections


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--no-freeze", action="store_true", help="leave gc.freeze() out (as before it was added)"
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="write a cProfile of the last sixth of the turns"
    )
    args = parser.parse_args()
    profile = cProfile.Profile() if args.profile else None
    cpu, collections = asyncio.run(run(args.turns, profile, freeze=not args.no_freeze))
    if profile is not None:
        profile.dump_stats(args.profile)
    ms = [c * 1000 for c in cpu]
    span = max(1, min(50, len(ms) // 6))
    early, late = statistics.mean(ms[:span]), statistics.mean(ms[-span:])
    print(f"CPU per turn over a {len(ms)}-turn uncompacted conversation (pid {os.getpid()})")
    print(f"{'mean ms':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'max ms':>7} | {'growth':>7}")
    print("-" * 50)
    print(
        f"{statistics.mean(ms):>8.2f} | {pct(ms, 0.5):>7.2f} | {pct(ms, 0.99):>7.2f} | "
        f"{max(ms):>7.2f} | {late / early:>6.2f}x"
    )
    print(
        f"\nturns 1-{span}: {early:.2f} ms mean; turns {len(ms) - span + 1}-{len(ms)}: "
        f"{late:.2f} ms mean"
    )
    median = pct(ms, 0.5)
    spikes = [(i, m) for i, m in enumerate(ms) if m > 3 * median]
    print(f"turns over 3x the median ({3 * median:.1f} ms): {len(spikes)}")
    for i, m in spikes[:20]:
        counts, seconds = collections[i]
        print(
            f"  turn {i + 1}: {m:.1f} ms; gc gen0/1/2 {counts[0]}/{counts[1]}/{counts[2]} "
            f"taking {seconds * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
