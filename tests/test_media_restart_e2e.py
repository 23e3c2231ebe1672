"""End to end, the real `krill run` over the fake Bot API: an image can no longer crash-loop
Krill. A bomb refused when its message is accepted is never decoded again by the turn that
a restart runs, and an image whose preparation killed the process is refused when Telegram
delivers it again, instead of killing the new process too.

Each test starts its own Krill (twice: killed with -9, then started again in the same
folder). Peak memory is the kernel's high-water mark (VmHWM) of the restarted process.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from pathlib import Path
from typing import Any

from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess
from tests.pictures import streamed_png

TIMEOUT = 30.0
# A restarted Krill that decodes nothing grows by a few MB answering two turns; decoding
# the 196 Mpx bomb would take 784 MB, the 90 Mpx picture 360 MB.
GROWTH_MB = 150


def settings(tg: FakeTelegram, **media: Any) -> dict[str, Any]:
    return {
        "anthropic": {"max_retries": 0},
        "telegram": telegram_section(tg, mode="polling"),
        "media": media,
    }


def peak_mb(krill: KrillProcess) -> float:
    assert krill.proc is not None
    status = Path(f"/proc/{krill.proc.pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


async def bot_says(tg: FakeTelegram, chat: int, *needles: str) -> str:
    """The first message the bot sent to `chat` that holds every one of `needles`."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            for message in tg.bot_messages(chat):
                if all(needle in message["text"] for needle in needles):
                    return str(message["text"])
            await asyncio.sleep(0.05)


async def recorded_sent(krill: KrillProcess, needle: str) -> None:
    """Wait until Krill has recorded as sent the outbox row holding `needle`: killed between
    the platform's answer and that record, a restart would send it again (a send cut off by
    a crash is repeated), which is not what these tests are about."""
    db = f"file:{krill.directory / 'data' / 'krill.db'}?mode=ro"
    async with asyncio.timeout(TIMEOUT):
        while True:
            with contextlib.closing(sqlite3.connect(db, uri=True)) as con:
                query = "SELECT status FROM outbox WHERE text LIKE ?"
                statuses = [s for (s,) in con.execute(query, (f"%{needle}%",))]
            if statuses and all(s == "sent" for s in statuses):
                return
            await asyncio.sleep(0.05)


async def log_says(krill: KrillProcess, needle: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while needle not in krill.log():  # noqa: ASYNC110 (a log file has no event)
            await asyncio.sleep(0.01)


def request_with(model: FakeAnthropic, caption: str) -> str:
    """The last user message of the one request whose person's text was `caption`."""
    (request,) = [r for r in model.message_requests if f"\n{caption}\n" in r.last_user_text]
    return str(request.messages[-1])


async def test_a_refused_bomb_waiting_in_the_inbound_queue_is_not_decoded_after_a_restart(
    tmp_path: Path,
) -> None:
    bomb = streamed_png(14000, 14000)  # 196 Mpx RGBA in 0.8 MB
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        model.queue_text("a slow answer", delay=TIMEOUT * 2)
        krill = await KrillProcess(tmp_path, settings(tg), model.env()).start()
        try:
            tg.push_update(tg.private_message(801, "first question"))
            await model.wait_for_requests(1, within=TIMEOUT)
            # Queued behind the running turn: accepted and recorded, not yet answered.
            tg.push_update(
                tg.document_message(
                    801, 801, bomb, file_name="bomb.png", mime_type="image/png", caption="see"
                )
            )
            notice = await bot_says(tg, 801, "I can't open bomb.png")
            await recorded_sent(krill, "bomb.png")
        finally:
            await krill.kill()
        assert "over the 40 million limit for images" in notice

        async with KrillProcess(tmp_path, settings(tg), model.env()) as restarted:
            start = peak_mb(restarted)
            await bot_says(tg, 801, "echo:", "\nsee\n")
            grown = peak_mb(restarted) - start
        seen = request_with(model, "see")
        assert "not shown: it has over 100 million pixels" in seen and "bomb.png" in seen
        assert grown < GROWTH_MB, f"the restarted Krill grew by {grown:.0f} MB"
        assert "preparing image" not in restarted.log()
        # Told once, when the message was accepted; the restart does not tell again.
        assert len([m for m in tg.bot_messages(801) if "I can't open" in m["text"]]) == 1


async def test_an_image_that_killed_krill_while_being_prepared_is_refused_when_delivered_again(
    tmp_path: Path,
) -> None:
    # Allowed (90 Mpx under a 100 Mpx limit) but 360 MB to decode: long enough to die in.
    picture = streamed_png(10_000, 9_000)
    media = {"max_pixels": 100_000_000}
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        krill = await KrillProcess(tmp_path, settings(tg, **media), model.env()).start()
        try:
            tg.push_update(
                tg.document_message(
                    802, 802, picture, file_name="huge.png", mime_type="image/png", caption="hi"
                )
            )
            # Killed mid-decode, as an out-of-memory kill would do it.
            await log_says(krill, "preparing image huge.png")
        finally:
            await krill.kill()
        assert tg.pending_updates  # never confirmed: Telegram delivers it again

        async with KrillProcess(tmp_path, settings(tg, **media), model.env()) as restarted:
            start = peak_mb(restarted)
            notice = await bot_says(tg, 802, "I can't open huge.png")
            await bot_says(tg, 802, "echo:", "\nhi\n")
            grown = peak_mb(restarted) - start
        assert notice == (
            "I can't open huge.png: opening it stopped Krill the last time, so it is not "
            "opened again."
        )
        assert "opening it stopped Krill the last time" in request_with(model, "hi")
        assert grown < GROWTH_MB, f"the restarted Krill grew by {grown:.0f} MB"
        assert "preparing image" not in restarted.log()
        assert "a process died preparing it before" in restarted.log()
