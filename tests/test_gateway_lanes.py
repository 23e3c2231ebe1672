"""The session lanes' turn budget per sender (`agent.sender_turns_per_minute`): a flood of
one person's messages waits and merges into few turns; nothing is dropped."""

from __future__ import annotations

import asyncio
import time

from bot.agent.runner import TurnJob
from bot.config import Config
from bot.config.sections import AgentConfig
from bot.gateway.lanes import Lanes, MessageWork
from bot.metrics import Metrics
from tests.app_harness import message

WINDOW = 0.5  # stands in for the minute


class RecordingRunner:
    """Records each turn's messages; the first turn waits until `release` is set."""

    def __init__(self) -> None:
        self.turns: list[tuple[float, list[str]]] = []
        self.release = asyncio.Event()

    async def run(self, job: TurnJob) -> None:
        self.turns.append((time.monotonic(), [m.text for m in job.messages]))
        if len(self.turns) == 1:
            await self.release.wait()


def lanes(runner: RecordingRunner, per_minute: int) -> Lanes:
    config = Config(agent=AgentConfig(sender_turns_per_minute=per_minute))
    return Lanes(config=config, runner=runner, metrics=Metrics(), turn_window=WINDOW)  # type: ignore[arg-type]


def submit(lane: Lanes, *texts: str, user: str = "alice") -> None:
    for n, text in enumerate(texts):
        lane.submit(f"key:{user}", MessageWork(n, message(text, user=user)))


async def test_a_senders_last_turn_of_the_window_takes_every_waiting_message() -> None:
    runner = RecordingRunner()
    lane = lanes(runner, per_minute=2)
    submit(lane, "m1")
    await asyncio.sleep(0)
    submit(lane, *(f"m{n}" for n in range(2, 60)))  # more than agent.queue_cap
    runner.release.set()
    await lane.wait_idle()
    assert [texts for _, texts in runner.turns] == [["m1"], [f"m{n}" for n in range(2, 60)]]

    # Over the budget: the next messages wait for the window, then go in one turn.
    submit(lane, "late 1")
    await asyncio.sleep(WINDOW / 5)
    submit(lane, "late 2", "late 3")
    await lane.wait_idle()
    started, texts = runner.turns[-1]
    assert texts == ["late 1", "late 2", "late 3"]
    assert started - runner.turns[0][0] >= WINDOW * 0.9
    await lane.close()


async def test_without_a_cap_batches_keep_the_queue_cap() -> None:
    runner = RecordingRunner()
    lane = lanes(runner, per_minute=0)
    submit(lane, "m1")
    await asyncio.sleep(0)
    submit(lane, *(f"m{n}" for n in range(2, 30)))
    runner.release.set()
    await lane.wait_idle()
    assert [len(texts) for _, texts in runner.turns] == [1, 20, 8]
    await lane.close()
