"""Benchmark: media preparation, its peak memory, and what images cost over a conversation.

1. Peak memory of accepting one message's images (stored, prepared), each case in a fresh
   process: its resident memory once the files are read, and the high-water mark of
   `MediaPreparer.accept` (VmHWM, reset just before). A 12 MP JPEG, a 40 Mpx PNG, a
   196 Mpx PNG decompression bomb (14000x14000 RGBA, under 1 MB), and albums of three of
   the last two.
2. Prepare a photo of N megapixels as Krill does on Telegram: download it from the fake Bot
   API (getFile + file URL, python-telegram-bot), store the original content-addressed,
   downscale it (EXIF orientation, metadata stripped), store the result. p50/p95 over runs.
   Then an album of several such photos, accepted as one message.
3. Bytes sent to the model (base64 of the downscaled image) against the original file.
4. A 30-turn conversation with 10 photos, replayed through the real core against the fake
   Anthropic server (which simulates prompt caching and bills images by pixels) on a
   simulated clock with a cold cache every few turns: with placeholder pruning
   (`media.keep_images_turns = 3`) and without (every image resent every turn).

Prices: Sonnet, $3/M input, cache write x1.25 (5m), read x0.1, $15/M output.
Run: python bench/media.py [--runs 20] [--megapixels 12] [--album 4] [--turns 30] [--photos 10]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image

from bot.config import MediaConfig, TranscriptionConfig
from bot.media.files import MediaFiles
from bot.media.prepare import MediaPreparer
from bot.media.transcribe import Transcriber
from bot.types import Attachment, MediaKind
from channels.telegram.media import download
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.pictures import streamed_png

INPUT, OUTPUT, WRITE, READ = 3.0 / 1e6, 15.0 / 1e6, 1.25, 0.1


def new_preparer(folder: str) -> MediaPreparer:
    return MediaPreparer(
        MediaConfig(), MediaFiles(Path(folder)), Transcriber(TranscriptionConfig())
    )


def images(pictures: list[bytes], mime: str) -> list[Attachment]:
    return [
        Attachment(MediaKind.IMAGE, f"p{i}", mime, data=data) for i, data in enumerate(pictures)
    ]


def photo(megapixels: float, seed: int = 0) -> bytes:
    width = int((megapixels * 1e6 * 4 / 3) ** 0.5)
    height = int(width * 3 / 4)
    # Noise compresses like a real photo does (a flat colour would be unrealistically small).
    image = Image.effect_noise((width, height), 60 + seed).convert("RGB")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


async def preparation(runs: int, megapixels: float) -> tuple[list[float], int, int]:
    data = photo(megapixels)
    times: list[float] = []
    sent = 0
    with tempfile.TemporaryDirectory() as tmp:
        preparer = new_preparer(tmp)
        async with FakeTelegram() as tg:
            bot = tg.make_bot()
            async with bot:
                for i in range(runs):
                    update = tg.document_message(
                        1, 1, data, file_name=f"p{i}.jpg", mime_type="image/jpeg"
                    )
                    msg = bot_message(update, bot)
                    start = time.perf_counter()
                    attachments = await download(bot, msg, MediaConfig().max_bytes)
                    (ref,) = await preparer.refs(await preparer.accept(attachments))
                    times.append((time.perf_counter() - start) * 1000)
                    sent = len(base64.b64encode(preparer.files.read(ref.sha256)))
    return times, len(data), sent


async def album_preparation(runs: int, megapixels: float, size: int) -> list[float]:
    pictures = [photo(megapixels, seed=i) for i in range(size)]
    times: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            preparer, attachments = new_preparer(tmp), images(pictures, "image/jpeg")
            start = time.perf_counter()
            await preparer.refs(await preparer.accept(attachments))
            times.append((time.perf_counter() - start) * 1000)
    return times


MEMORY_CASES = {
    "12 MP JPEG": ["jpeg12"],
    "40 Mpx PNG (8000x5000 RGBA)": ["png40"],
    "196 Mpx PNG bomb (14000x14000 RGBA)": ["bomb"],
    "album: three 40 Mpx PNGs": ["png40", "png40b", "png40c"],
    "album: three 196 Mpx bombs": ["bomb", "bomb", "bomb"],
}


def write_pictures(folder: Path) -> dict[str, Path]:
    made = {
        "jpeg12": photo(12.0),
        "png40": streamed_png(8000, 5000, texture=True),
        "png40b": streamed_png(5000, 8000, texture=True),
        "png40c": streamed_png(6400, 6250, texture=True),
        "bomb": streamed_png(14000, 14000),
    }
    paths = {}
    for name, data in made.items():
        paths[name] = folder / name
        paths[name].write_bytes(data)
    return paths


def rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the high-water mark) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(field)


def memory_case(paths: list[str]) -> None:
    """In a fresh process: accept `paths` as one message's images; print the figures."""
    pictures = [Path(p).read_bytes() for p in paths]
    with tempfile.TemporaryDirectory() as tmp:
        preparer, attachments = new_preparer(tmp), images(pictures, "image/png")
        before = rss_mb("VmRSS")
        # The high-water mark restarts here (clear_refs 5), leaving out start-up's peaks.
        Path("/proc/self/clear_refs").write_text("5")
        accepted = asyncio.run(preparer.accept(attachments))
        after = rss_mb("VmHWM")
    done = [f"{a.width}x{a.height}" for a in accepted if a.width]
    if len(accepted) == 1:
        outcome = done[0] if done else "refused"
    else:
        outcome = f"{len(done)} prepared" if done else f"{len(accepted)} refused"
    sizes = sum(map(len, pictures))
    print(json.dumps({"before": before, "after": after, "outcome": outcome, "bytes": sizes}))


def memory_table() -> None:
    print("accepting images, one fresh process each | file MB | outcome        | RSS MB | growth")
    print("-" * 92)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_pictures(Path(tmp))
        for label, names in MEMORY_CASES.items():
            done = subprocess.run(
                [sys.executable, __file__, "--memory-case", ",".join(str(paths[n]) for n in names)],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout.splitlines()[-1])
            print(
                f"{label:<41} | {row['bytes'] / 1e6:>7.2f} | {row['outcome'][:14]:<14} | "
                f"{row['after']:>6.0f} | {row['after'] - row['before']:>+6.0f}"
            )
    print()


def percentiles(times: list[float]) -> str:
    p95 = sorted(times)[math.ceil(len(times) * 0.95) - 1]  # nearest rank
    return f"p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms"


def bot_message(update: dict[str, Any], bot: Any) -> Any:
    from telegram import Update

    parsed = Update.de_json(update, bot)
    assert parsed is not None and parsed.message is not None
    return parsed.message


def cost(fake: FakeAnthropic) -> tuple[float, int]:
    total = 0.0
    prompt = 0
    for request in fake.message_requests:
        usage = request.usage or {}
        total += (
            usage.get("input_tokens", 0) * INPUT
            + usage.get("cache_creation_input_tokens", 0) * INPUT * WRITE
            + usage.get("cache_read_input_tokens", 0) * INPUT * READ
            + usage.get("output_tokens", 0) * OUTPUT
        )
        prompt += (
            usage.get("input_tokens", 0)
            + usage.get("cache_creation_input_tokens", 0)
            + usage.get("cache_read_input_tokens", 0)
        )
    return total, prompt


async def conversation(turns: int, photos: int, keep: int) -> tuple[float, int]:
    every = max(turns // max(photos, 1), 1)
    pictures = [photo(2.0, seed=i) for i in range(photos)]
    now = [1_000_000.0]
    toml = (
        "[agent]\nsender_turns_per_minute = 0\n"
        "[memory]\nenabled = false\n[scheduler]\nidle_compaction = false\n"
        f"[media]\nkeep_images_turns = {keep}\n"
    )
    async with FakeAnthropic() as fake:
        fake.cache.clock = lambda: now[0]
        with tempfile.TemporaryDirectory() as tmp:
            async with Harness(Path(tmp), fake.url, toml, clock=lambda: now[0]) as h:
                for turn in range(turns):
                    msg = message(f"turn {turn}: what do you make of this?")
                    if turn % every == 0 and turn // every < photos:
                        data = pictures[turn // every]
                        msg.attachments = [
                            Attachment(MediaKind.IMAGE, f"photo{turn}.jpg", "image/jpeg", data=data)
                        ]
                    # A cold cache every fifth turn (a break of 10 minutes), else a minute.
                    now[0] += 600 if turn % 5 == 4 else 60
                    await h.send(msg)
        return cost(fake)


async def main_async(args: argparse.Namespace) -> None:
    memory_table()
    times, original, sent = await preparation(args.runs, args.megapixels)
    print(f"prepare a {args.megapixels:g} MP photo ({args.runs} runs): {percentiles(times)}")
    if args.album > 1:
        runs = max(args.runs // 4, 1)
        album = await album_preparation(runs, args.megapixels, args.album)
        print(f"prepare an album of {args.album} such photos ({runs} runs): {percentiles(album)}")
    print(
        f"bytes: original {original:,}, sent to the model (base64) {sent:,} ({sent / original:.1%})"
    )
    with_pruning = await conversation(args.turns, args.photos, keep=3)
    without = await conversation(args.turns, args.photos, keep=10_000)
    print(f"\n{args.turns}-turn conversation, {args.photos} photos | prompt tokens |    cost")
    print("-" * 64)
    for label, (dollars, tokens) in (
        ("images kept whole", without),
        ("placeholders (keep 3 turns)", with_pruning),
    ):
        print(f"{label:<40} | {tokens:>13,} | ${dollars:.4f}")
    print(f"saving: {1 - with_pruning[0] / without[0]:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--megapixels", type=float, default=12.0)
    parser.add_argument("--album", type=int, default=4)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--photos", type=int, default=10)
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)  # one row of the table
    args = parser.parse_args()
    if args.memory_case:
        memory_case(args.memory_case.split(","))
    else:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
