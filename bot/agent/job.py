"""What one turn is given: `TurnJob`, built by the gateway's lanes and the scheduler, run by
the runner (bot/agent/runner.py) and handed to the parts that take part in a turn
(bot/agent/hooks.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.tools.policy import ToolPolicy
from bot.transcript import PromptPurpose, new_id
from bot.types import Address, CostKind, InboundMessage

# What an internal prompt's model calls count as in the costs: written out for every
# purpose, so a new purpose without a kind fails its test instead of a turn.
COST_KIND_OF: dict[PromptPurpose, CostKind] = {
    PromptPurpose.FLUSH: CostKind.FLUSH,
    PromptPurpose.HEARTBEAT: CostKind.HEARTBEAT,
    PromptPurpose.REMINDER: CostKind.REMINDER,
    PromptPurpose.APPROVAL: CostKind.TOOL_FOLLOWUP,  # the asking person's turn, going on
    PromptPurpose.JOB: CostKind.JOB,
}


@dataclass(frozen=True, slots=True)
class OnBehalf:
    """Whom an internal turn acts for (a scheduled job's creator): tools see them as the
    turn's principal, and the turn gets the tools their conversation allows them."""

    principal: str
    name: str
    admin: bool
    policy: ToolPolicy


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
    # An internal turn run for someone (None: for nobody, with only the global tool rules).
    on_behalf: OnBehalf | None = None

    @property
    def first(self) -> InboundMessage | None:
        return self.messages[0] if self.messages else None

    @property
    def address(self) -> Address | None:
        return self.messages[-1].address if self.messages else None

    @property
    def cost_kind(self) -> CostKind:
        """What the turn's first model call is for: a person's turn (a resumed one goes on
        after tool results), else its internal prompt's purpose (heartbeat, reminder, job)."""
        if self.prompt is None:
            return CostKind.TOOL_FOLLOWUP if self.resume else CostKind.TURN
        return COST_KIND_OF[PromptPurpose(self.kind)]


def new_turn_id() -> str:
    return new_id()
