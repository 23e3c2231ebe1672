"""A session's recent history as one of its people saw it: their own messages and the
replies to the turns they were part of, for a chat page to redraw itself after a reload.

Only lines of that person are kept, so a session shared by several people (e.g.
`session.dm_scope = "main"`) never shows one person what another said. Krill's own prompts
(heartbeat, memory flush) were never shown, and neither are their replies.
"""

from __future__ import annotations

from bot.agent.silent import strip_silent
from bot.transcript import AssistantReply, Entry, InternalPrompt, PersonTurn
from bot.types import HistoryLine, Speaker


def person_history(entries: list[Entry], channel: str, user_id: str) -> list[HistoryLine]:
    """The lines of `entries` (one session, in order) that `channel`:`user_id` took part in."""
    lines: list[HistoryLine] = []
    reply: list[str] = []
    reply_at = 0.0
    theirs = False

    def end_turn() -> None:
        text = strip_silent("\n\n".join(reply))
        if theirs and text:
            lines.append(HistoryLine(Speaker.ASSISTANT, text, reply_at))
        reply.clear()

    for entry in entries:
        payload = entry.payload
        if isinstance(payload, PersonTurn | InternalPrompt):
            end_turn()
            own = (
                [m for m in payload.messages if (m.channel, m.user_id) == (channel, user_id)]
                if isinstance(payload, PersonTurn)
                else []
            )
            theirs = bool(own)
            lines.extend(HistoryLine(Speaker.PERSON, m.text, m.timestamp) for m in own)
        elif isinstance(payload, AssistantReply) and payload.text.strip():
            reply.append(payload.text.strip())
            reply_at = entry.created_at
    end_turn()
    return lines
