"""What one turn is given: `TurnJob`, built by the gateway's lanes and the scheduler, run by
the runner (bot/agent/runner.py) and handed to the parts that take part in a turn
(bot/agent/hooks.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.transcript import new_id
from bot.types import Address, InboundMessage


@dataclass(slots=True)
class TurnJob:
    """Everything needed to run (or resume) one turn."""

    session_key: str
    turn_id: str
    messages: list[InboundMessage] = field(default_factory=list)
    inbound_ids: list[int] = field(default_factory=list)
    resume: bool = False
    # Silent turns (memory flush, heartbeat) carry an internal prompt and show nothing.
    prompt: str | None = None
    kind: str = "user"  # a PromptPurpose for internal prompts
    history_limit: int = 0

    @property
    def first(self) -> InboundMessage | None:
        return self.messages[0] if self.messages else None

    @property
    def address(self) -> Address | None:
        return self.messages[-1].address if self.messages else None


def new_turn_id() -> str:
    return new_id()
