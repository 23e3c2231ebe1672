"""The press of an approval (a tool call marked confirm in `[tools.policy]`, held by
bot/buttons/approvals.py): Approve runs the call, under the policy of its conversation as
it is now, and a new turn gives the model its result; Deny, or no answer within
`tools.policy.confirm_timeout`, gives the model the refusal instead. The model's reply goes
to the conversation.

Its turn has an id of its own, so a press acted on again after a crash resumes that turn
(the call does not run twice) and its reply is one outbox reply."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from bot.agent.runner import TurnJob
from bot.buttons.approvals import APPROVE, HeldCall
from bot.buttons.choices import Outcome, presser
from bot.sessions.limits import history_limit_for
from bot.store.choices import Choice, ChoiceOption
from bot.tools.policy import resolve_policy
from bot.transcript import PromptPurpose

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.config import Config
    from bot.outbox.writer import Outbox
    from bot.store.base import Store
    from bot.tools.registry import ToolRegistry, ToolResultContent

log = logging.getLogger(__name__)

RESULT_CHARS = 20_000  # of a result put in the prompt; the rest is said to be cut
APPROVED = (
    "[Approval] {who} approved your call to {name} (id {id}). It ran; its result follows. "
    "Tell them briefly what came of it.\n\n{result}"
)
DENIED = (
    "[Approval] {who} denied your call to {name} (id {id}): it did not run. Do not try it "
    "again unless they ask; say briefly that it was not done."
)
TIMED_OUT = (
    "[Approval] Nobody approved your call to {name} (id {id}) within {timeout}: it did not "
    "run. Say so briefly; they can ask again."
)
RESET_SINCE = "⌛ Not run: the conversation was reset since it was asked."


def result_text(content: ToolResultContent) -> str:
    """A tool result as prompt text (images are named, not shown)."""
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(
            str(block.get("text", "")) if block.get("type") == "text" else f"[{block['type']}]"
            for block in content
        )
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "\n[… cut]"


class ApprovalChoice:
    """The `ChoiceAction` of approvals."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        tools: ToolRegistry,
        runner: AgentRunner,
        outbox: Outbox,
        workspace: Path,
    ) -> None:
        self.config = config
        self.store = store
        self.tools = tools
        self.runner = runner
        self.outbox = outbox
        self.workspace = workspace

    async def act(self, choice: Choice) -> Outcome:
        held = HeldCall.from_payload(choice.payload, self.workspace)
        ctx = held.context
        session = await self.store.current_session(choice.session_key)
        if session is None or session.session_id != ctx.session_id:
            return Outcome(RESET_SINCE)
        who = presser(choice)
        option = choice.pressed_option
        turn_id = f"approval-{choice.id}"
        resume = await self.store.session_of_turn(turn_id) is not None
        timeout = self.config.tools.policy.confirm_timeout  # as the operator wrote it
        if option is None:
            outcome = f"⌛ Not approved within {timeout}: not run."
        elif option.value == APPROVE:
            outcome = f"✅ Approved by {who}."
        else:
            outcome = f"❌ Denied by {who}: not run."
        # A resumed turn has its prompt, and the call's result, already.
        prompt = "" if resume else await self._prompt(held, who, option, timeout)
        job = TurnJob(
            choice.session_key,
            turn_id,
            resume=resume,
            prompt=prompt,
            kind=PromptPurpose.APPROVAL,
            history_limit=history_limit_for(self.config, session.origin),
        )
        reply = await self.runner.run(job)
        if reply.text and ctx.address is not None:
            await self.outbox.send_text(ctx.address, reply.text, reply_id=f"{turn_id}/reply")
        log.info("approval %s of %s: %s", choice.id, held.call["name"], outcome)
        return Outcome(outcome)

    async def _prompt(
        self, held: HeldCall, who: str, option: ChoiceOption | None, timeout: str
    ) -> str:
        """What the model is told; an approved call runs first, under its conversation's
        policy as it is now (a tool taken away since does not run)."""
        call, ctx, origin = held.call, held.context, held.origin
        fields = {"who": who, "name": call["name"], "id": call["id"], "timeout": timeout}
        if option is None:
            return TIMED_OUT.format(**fields)
        if option.value != APPROVE:
            return DENIED.format(**fields)
        policy = resolve_policy(
            self.config,
            channel=origin.channel,
            chat_type=origin.chat_type,
            chat_id=origin.chat_id,
            user_id=ctx.principal.partition(":")[2],
            admin=ctx.admin,
        )
        result = await self.tools.run(call, ctx, policy=policy, approved=True)
        return APPROVED.format(**fields, result=result_text(result.content))
