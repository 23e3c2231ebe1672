"""Several real `krill run` replicas sharing one folder (one krill.toml, one workspace) and one
store, each on its own port, wired to the loopback fakes.

Telegram webhook updates go to the replicas round-robin, as a load balancer spreads them;
an update whose replica does not answer (killed, or a 5xx) goes to the next live one, as
the proxy retries it and Telegram redelivers it, so dedupe in the store is what keeps it
from being answered twice. Replies are read back per chat from the fake Bot API, where each
posted message carries a token (`c<chat>m<n>`) that the fake model's echo repeats.

Shared by tests/test_replicas_e2e.py and bench/replicas.py.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import aiohttp

from tests.channel_env import SECRET_HEADER, WEBHOOK_SECRET, telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, free_port

TOKEN_RE = re.compile(r"\bc(\d+)m(\d+)\b")


def token(chat: int, n: int) -> str:
    """The word message `n` of `chat` carries, and its answer repeats."""
    return f"c{chat}m{n}"


def replica_config(
    tg: FakeTelegram, storage_url: str, *, lease_seconds: float = 2.0, **sections: Any
) -> dict[str, Any]:
    """The krill.toml every replica shares: Telegram over webhooks (the URL names the load
    balancer; here the first replica's port stands in for it), short leases so a dead
    replica's sessions are taken over within seconds, and `sections` on top."""
    port = free_port()
    config: dict[str, Any] = {
        "server": {"port": port},
        "anthropic": {"max_retries": 0},
        "storage": {
            "url": storage_url,
            "lease_seconds": lease_seconds,
            "outbox_retry_first_seconds": 0.2,
            "outbox_retry_max_seconds": 1.0,
        },
        "telegram": telegram_section(tg, port=port),
    }
    for name, section in sections.items():
        config[name] = config.get(name, {}) | section
    return config


class ReplicaSet:
    """`count` replicas of one config in `directory`; `await start()`, `await stop()`."""

    def __init__(
        self,
        directory: Path,
        tg: FakeTelegram,
        model: FakeAnthropic,
        config: dict[str, Any],
        count: int,
        env: dict[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.tg = tg
        self.model = model
        self.config = config
        self.env = model.env() | (env or {})
        self.replicas = [self._replica(i, free_port()) for i in range(count)]
        self.dead: set[int] = set()
        self._turn = itertools.count()

    def _replica(self, index: int, port: int, start: int = 0) -> KrillProcess:
        # One config file for all; each replica's own port comes from the environment, as
        # an operator running several on one host would set it.
        config = self.config | {"server": self.config["server"] | {"port": port}}
        env = self.env | {"KRILL_SERVER__PORT": str(port)}
        name = f"replica-{index}" + (f"-{start}" if start else "")
        return KrillProcess(self.directory, config, env, log_name=name)

    @property
    def live(self) -> list[int]:
        return [i for i in range(len(self.replicas)) if i not in self.dead]

    async def start(self) -> ReplicaSet:
        # The first one alone, so it creates (and migrates) the store and copies the workspace
        # before the others start; then the rest together.
        await self.replicas[0].start()
        await asyncio.gather(*(r.start() for r in self.replicas[1:]))
        return self

    async def stop(self) -> None:
        await asyncio.gather(*(self.replicas[i].stop() for i in self.live))

    async def kill(self, index: int) -> None:
        """SIGKILL: the replica gets no chance to finish or hand anything over."""
        self.dead.add(index)
        await self.replicas[index].kill()

    async def restart(self, index: int) -> None:
        """Start a dead replica again on its port, as a supervisor restarts a crashed one."""
        starts = len(list(self.directory.glob(f"replica-{index}*.log")))
        self.replicas[index] = self._replica(index, self.replicas[index].port, starts)
        await self.replicas[index].start()
        self.dead.discard(index)

    async def post_update(
        self, http: aiohttp.ClientSession, update: dict[str, Any], replica: int | None = None
    ) -> int:
        """POST `update` to `replica` (default: the next in turn); one that fails is tried on
        the next live replica. Returns the replica that acknowledged it with 200."""
        first = next(self._turn) if replica is None else replica
        count = len(self.replicas)
        for step in range(count * 3):
            index = (first + step) % count
            if index in self.dead:
                continue
            url = f"{self.replicas[index].url}/telegram/webhook"
            try:
                async with http.post(
                    url, json=update, headers={SECRET_HEADER: WEBHOOK_SECRET}
                ) as resp:
                    if resp.status == 200:
                        return index
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
        raise AssertionError(f"no replica acknowledged update {update['update_id']}")

    def answered(self, chat: int) -> list[int]:
        """The message numbers the bot's messages in `chat` answer, in the order sent."""
        numbers: list[int] = []
        for message in self.tg.bot_messages(chat):
            for chat_id, n in TOKEN_RE.findall(str(message.get("text", ""))):
                if int(chat_id) == chat:
                    numbers.append(int(n))
        return numbers

    def unanswered(self, chats: list[int], messages: int) -> dict[int, list[int]]:
        """Per chat, the numbers below `messages` no reply has repeated yet."""
        missing = {chat: sorted(set(range(messages)) - set(self.answered(chat))) for chat in chats}
        return {chat: numbers for chat, numbers in missing.items() if numbers}

    async def wait_answered(self, chats: list[int], messages: int, within: float) -> None:
        """Until messages 0..messages-1 of every chat are answered; on timeout, says which
        were not."""
        try:
            async with asyncio.timeout(within):
                while self.unanswered(chats, messages):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
        except TimeoutError:
            missing = self.unanswered(chats, messages)
            raise AssertionError(f"never answered: {missing}\n{self.logs()}") from None

    def logs(self) -> str:
        return "\n".join(f"--- replica {i}\n{r.log()[-4000:]}" for i, r in enumerate(self.replicas))
