"""The press of an `ask_choice` button: the option's words become the presser's next
message in the session, recorded like an accepted message (deduplicated by the choice, so
a press acted on twice is one message) and answered by a turn like anything they type.

It is not a command and not group chatter: it skips the command parser (an option that
reads "/reset" is words) and counts as addressed to the bot."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.buttons.choices import TIMED_OUT_LINE, Outcome
from bot.gateway.lanes import MessageWork
from bot.store.choices import Choice
from bot.types import Address, ChatType, InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.gateway.lanes import Lanes
    from bot.gateway.service import ActivityObserver
    from bot.metrics import Metrics
    from bot.store.base import InboundStore

log = logging.getLogger(__name__)

ANSWERED = "✅ {who}: {label}"
ANSWER_CONTEXT = "[{who} answered your question by pressing a button: {question}]"


def answer_message(choice: Choice, at: float) -> InboundMessage | None:
    """The message a press of `choice` stands for (None: it expired unanswered)."""
    option = choice.pressed_option
    if option is None:
        return None
    where = choice.address
    origin = choice.payload.get("origin")
    chat_type = SessionOrigin.from_dict(origin).chat_type if origin else ChatType.DIRECT
    channel, _, user_id = choice.pressed_by.partition(":")
    return InboundMessage(
        channel=channel,
        message_id=f"press:{choice.id}",
        chat_type=chat_type,
        chat_id=where.chat_id,
        user_id=user_id,
        text=option.label,
        address=Address(where.channel, where.chat_id, where.thread_id, None, where.private_to),
        user_name=choice.pressed_name,
        thread_id=where.thread_id,
        mentioned=True,
        timestamp=at,
        context_lines=[
            ANSWER_CONTEXT.format(who=choice.pressed_name or user_id, question=choice.text)
        ],
    )


class QuestionChoice:
    """The `ChoiceAction` of ask_choice questions."""

    def __init__(
        self,
        *,
        inbound: InboundStore,
        lanes: Lanes,
        activity: ActivityObserver,
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inbound = inbound
        self.lanes = lanes
        self.activity = activity
        self.metrics = metrics
        self.clock = clock

    async def act(self, choice: Choice) -> Outcome:
        msg = answer_message(choice, choice.pressed_at or self.clock())
        if msg is None:
            return Outcome(TIMED_OUT_LINE)
        key = choice.session_key
        inbound_id, _ = await self.inbound.accept_inbound(
            msg.channel, msg.message_id, key, msg.to_json()
        )
        if inbound_id is not None:  # None: taken in already, by an earlier run of this press
            self.metrics.messages_in.labels(msg.channel).inc()
            self.lanes.submit(key, MessageWork(inbound_id, msg))
            self.activity.note_activity(key)
        return Outcome(ANSWERED.format(who=msg.user_name or msg.user_id, label=msg.text))
