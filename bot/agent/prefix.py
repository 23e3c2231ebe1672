"""A session's request prefix as its turns send it (model, system prompt, tool list, and the
messages as its context plan shapes them), for the out-of-band calls that should read its
prompt cache: the memory flush and warm compaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.context.host import CachedPrefix
from bot.sessions.limits import history_limit_for
from bot.sessions.window import session_limits
from bot.store.base import SessionRow
from bot.tools.policy import ToolPolicy, policy_for_messages
from bot.transcript import Entry, PersonTurn
from bot.types import Address, ChatType, InboundMessage

if TYPE_CHECKING:
    from bot.agent.workspace import Workspace
    from bot.config import Config
    from bot.context.planned import PlannedRequests
    from bot.store.base import Store
    from bot.tools.registry import ToolRegistry


def turn_senders(history: list[Entry], session: SessionRow) -> list[InboundMessage]:
    """Stand-ins for the messages of the session's latest person turn, so the flush gets
    the tool policy (and tool list, part of the cached prefix) that turn had."""
    latest = next((e.payload for e in reversed(history) if isinstance(e.payload, PersonTurn)), None)
    # A row whose key never parsed has no origin: only the global rules apply to it.
    chat_type = session.chat_type
    if latest is None or chat_type is None:
        return []
    senders = []
    for m in latest.messages:
        # A DM session spanning channels (main, linked identities) keeps each line's channel.
        chat_id = session.chat_id if chat_type != ChatType.DIRECT else m.user_id
        senders.append(
            InboundMessage(
                channel=m.channel,
                message_id=m.message_id,
                chat_type=chat_type,
                chat_id=chat_id,
                user_id=m.user_id,
                text="",
                address=Address(m.channel, chat_id),
            )
        )
    return senders


class RequestPrefixes:
    """Builds the prefix a session's prompt cache holds."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        workspace: Workspace,
        tools: ToolRegistry,
        requests: PlannedRequests,
    ) -> None:
        self.config = config
        self.store = store
        self.workspace = workspace
        self.tools = tools
        self.requests = requests

    async def build(
        self, session: SessionRow, history: list[Entry]
    ) -> tuple[CachedPrefix, ToolPolicy]:
        """The prefix for `history`, and the tool policy its tool list came from."""
        config = self.config
        # Same model, system prompt, tools and messages (the stored plan's pruning, cut and
        # image placeholders applied) as the session's turns: the cached prefix.
        policy = policy_for_messages(config, turn_senders(history, session))
        prefix = CachedPrefix(
            model=session_limits(config, session).model,
            system=self.workspace.system_blocks(
                is_direct=session.is_direct, origin=session.origin, policy=policy
            ),
            tools=self.tools.definitions(policy=policy),
            messages=await self.requests.request_messages(session, history),
        )
        return prefix, policy

    async def for_session(self, session: SessionRow) -> CachedPrefix:
        """The prefix of the session's history as its turns load it (history limit included)."""
        limit = history_limit_for(self.config, session.origin)
        history = await self.store.load_history(session.session_id, max_user_turns=limit)
        return (await self.build(session, history))[0]
