"""A stand-in for the core as adapters see it (`bot.channel_contract.Gateway`): it records
what an adapter hands over, for adapter tests against the platform fakes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bot.channel_contract import AcceptResult, PressAnswer, PressResult
from bot.config import ChannelPolicyConfig, SessionConfig
from bot.sessions.keys import session_key
from bot.sessions.limits import requires_mention
from bot.types import ButtonPress, HistoryLine, InboundMessage


class SoleLeader:
    """A leader lock nobody else wants: this process always leads."""

    async def try_acquire(self) -> bool:
        return True

    async def acquire(self) -> None:
        return None

    async def lost(self) -> None:
        await asyncio.Event().wait()  # never

    async def release(self) -> None:
        return None


class StubGateway:
    def __init__(self, policy: ChannelPolicyConfig | None = None) -> None:
        self.policy = policy  # the adapter's config section: decides mention gating
        self.accepted: list[InboundMessage] = []
        self.result = AcceptResult.ACCEPTED
        self.failures = 0  # accepts that raise, as if the store failed
        self.gate: asyncio.Event | None = None  # accept waits for it when set...
        self.passes: set[str] = set()  # ...except for these texts (sentinels)
        self.waiting = asyncio.Event()  # set once a message (or press) waits at its gate
        self.on_accept: Callable[[InboundMessage], Awaitable[object]] | None = None
        self.sessions: set[str] = set()  # session keys that have history
        self.bot_usernames: dict[str, str] = {}
        self.arrived = asyncio.Event()
        self.state: dict[tuple[str, str], str] = {}  # what the adapter asked to remember
        self.chat_names: dict[tuple[str, str], str] = {}  # titles the adapter looked up
        self.presses: list[ButtonPress] = []
        self.answer = PressAnswer(PressResult.DONE, "✓ Yes")  # what every press is told
        self.press_gate: asyncio.Event | None = None  # press waits for it when set

    async def accept(self, msg: InboundMessage) -> AcceptResult:
        if self.gate is not None and msg.text not in self.passes:
            self.waiting.set()
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        self.accepted.append(msg)
        self.arrived.set()
        if self.on_accept is not None:
            await self.on_accept(msg)
        return self.result

    async def press(self, press: ButtonPress) -> PressAnswer:
        if self.press_gate is not None:
            self.waiting.set()
            await self.press_gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        self.presses.append(press)
        self.arrived.set()
        return self.answer

    def register_bot_username(self, channel: str, username: str) -> None:
        self.bot_usernames[channel] = username

    def requires_mention(self, msg: InboundMessage) -> bool:
        return requires_mention(self.policy, msg.chat_type, msg.chat_id)

    async def session_exists(self, msg: InboundMessage) -> bool:
        return session_key(msg, SessionConfig()) in self.sessions

    async def wait_idle(self, msg: InboundMessage) -> None:
        return None

    async def recent_history(self, msg: InboundMessage, limit: int) -> list[HistoryLine]:
        return []

    def leadership(self, name: str) -> SoleLeader:
        return SoleLeader()

    async def remember(self, channel: str, key: str, value: str, seconds: float) -> None:
        if seconds > 0:
            self.state[(channel, key)] = value
        else:
            self.state.pop((channel, key), None)

    async def recall(self, channel: str, key: str) -> str | None:
        return self.state.get((channel, key))

    async def chat_name(self, channel: str, chat_id: str, name: str) -> None:
        self.chat_names[(channel, chat_id)] = name

    async def wrong_token(self, channel: str, client: str) -> float:
        return 0.0  # adapter tests do not count guesses; the real gateway does

    async def wait_presses(self, count: int, timeout: float = 5.0) -> list[ButtonPress]:
        """The recorded presses, once there are at least `count`."""
        async with asyncio.timeout(timeout):
            while len(self.presses) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.presses

    async def wait(self, count: int, timeout: float = 5.0) -> list[InboundMessage]:
        """The accepted messages, once there are at least `count`."""
        async with asyncio.timeout(timeout):
            while len(self.accepted) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.accepted
