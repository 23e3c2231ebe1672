"""Tool calls that wait for approval (`[tools.policy] confirm`): instead of running, the call
is shown to the person who asked, with Approve and Deny buttons, and the model reads that it
waits. The turn ends; chat goes on meanwhile. The press (bot/gateway/approvals.py) runs the
call and tells the model what came of it in a new turn, as it does a refusal or an approval
nobody gave within `tools.policy.confirm_timeout`.

The choice keeps what the call needs to run later: its name and input, and the tool
context of the turn that made it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anthropic.types import ToolUseBlockParam

from bot.buttons.choices import ChoiceSpec
from bot.store.choices import ChoiceKind, ChoiceOption
from bot.tools.registry import ToolContext, ToolResult
from bot.types import Address, ButtonStyle, SessionOrigin

if TYPE_CHECKING:
    from bot.buttons.offers import Offers
    from bot.config import Config

APPROVE, DENY = "approve", "deny"
SHOWN_INPUT_CHARS = 800  # of the call's input, in the question
QUESTION = "🔐 {who}, may I run **{name}**?\n```\n{input}\n```"
WAITING = (
    "Not run yet: {name} needs the approval of {who}, who was asked with Approve and Deny "
    "buttons. You will be told in a later message whether it ran, and its result. Do not "
    "call it again and do not ask again in words; end your turn now (reply NO_REPLY if "
    "there is nothing else to say)."
)
NO_BUTTONS = (
    "Error: not run. {name} needs the approval of the person who asked, and this "
    "conversation cannot show approval buttons."
)


@dataclass(frozen=True, slots=True)
class HeldCall:
    """A call waiting for approval, as its choice keeps it."""

    call: ToolUseBlockParam
    context: ToolContext
    origin: SessionOrigin  # the conversation, whose policy the call runs under

    def to_payload(self) -> dict[str, Any]:
        ctx = self.context
        return {
            "call": {"id": self.call["id"], "name": self.call["name"], "input": self.call["input"]},
            "context": {
                "session_key": ctx.session_key,
                "session_id": ctx.session_id,
                "principal": ctx.principal,
                "principal_name": ctx.principal_name,
                "is_direct": ctx.is_direct,
                "turn_id": ctx.turn_id,
                "origin": self.origin.to_dict(),
                "admin": ctx.admin,
                "address": ctx.address.to_dict() if ctx.address else None,
            },
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any], workspace: Path) -> HeldCall:
        call = payload["call"]
        ctx = payload["context"]
        origin = SessionOrigin.from_dict(ctx["origin"])
        context = ToolContext(
            session_key=ctx["session_key"],
            session_id=ctx["session_id"],
            principal=ctx["principal"],
            is_direct=ctx["is_direct"],
            workspace=workspace,
            turn_id=ctx["turn_id"],
            principal_name=ctx["principal_name"],
            origin=origin,
            admin=ctx["admin"],
            address=Address.from_dict(ctx["address"]) if ctx["address"] else None,
        )
        block: ToolUseBlockParam = {
            "type": "tool_use",
            "id": call["id"],
            "name": call["name"],
            "input": call["input"],
        }
        return cls(block, context, origin)


def shown_input(data: object) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    return text if len(text) <= SHOWN_INPUT_CHARS else text[:SHOWN_INPUT_CHARS] + "\n…"


class Approvals:
    """The tool registry's confirm hook."""

    def __init__(self, *, config: Config, offers: Offers) -> None:
        self.config = config
        self.offers = offers

    async def ask(self, call: ToolUseBlockParam, ctx: ToolContext) -> ToolResult:
        name = call["name"]
        address, origin = ctx.address, ctx.origin
        if address is None or origin is None or not self.offers.shows_buttons(address.channel):
            return ToolResult(call["id"], NO_BUTTONS.format(name=name), True)
        who = ctx.principal_name or ctx.principal.partition(":")[2]
        spec = ChoiceSpec(
            kind=ChoiceKind.APPROVAL,
            text=QUESTION.format(who=who, name=name, input=shown_input(call["input"])),
            options=(
                ChoiceOption("✅ Approve", APPROVE, ButtonStyle.PRIMARY),
                ChoiceOption("❌ Deny", DENY, ButtonStyle.DANGER),
            ),
            owner=ctx.principal,
            owner_name=who,
            payload=HeldCall(call, ctx, origin).to_payload(),
            columns=2,
            expire_seconds=self.config.tools.policy.timeout_seconds,
        )
        await self.offers.offer(spec, ctx.session_key, address)
        return ToolResult(call["id"], WAITING.format(name=name, who=who))
