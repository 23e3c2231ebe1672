"""History limits and mention gating: which settings apply to a given conversation.

Pure lookups over `ChannelPolicyConfig` plus the generic user-turn cut from docs/contracts.md
section 6.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from bot.config import ChannelPolicyConfig, Config, GroupOverride, PeerOverride
from bot.types import ChatType, SessionOrigin

T = TypeVar("T")
V = TypeVar("V")

NO_LIMIT = 0


def lookup_override(overrides: Mapping[str, V], ident: str) -> V | None:
    """`overrides[ident]`, falling back to a case-insensitive match.

    Override tables are typed by hand in TOML, so `[slack.dms."u123"]` should still find U123.
    """
    if ident in overrides:
        return overrides[ident]
    folded = ident.casefold()
    for name, value in overrides.items():
        if name.casefold() == folded:
            return value
    return None


def peer_override(policy: ChannelPolicyConfig, user_id: str) -> PeerOverride | None:
    return lookup_override(policy.dms, user_id)


def group_override(policy: ChannelPolicyConfig, chat_id: str) -> GroupOverride | None:
    return lookup_override(policy.group_overrides(), chat_id)


def resolve_history_limit(
    policy: ChannelPolicyConfig | None, msg_chat_type: ChatType, chat_id: str, user_id: str
) -> int:
    """User turns to keep for this conversation; 0 means no limit.

    docs/contracts.md (section 6) orders the sources per-user -> per-group/channel -> default.
    A per-user override (`dms."<id>"`) describes that person's own DM, so it is consulted for
    DMs only; in a group one member's setting must not trim everyone else's shared history.
    """
    if policy is None:  # the local channel has no policy section and keeps everything
        return NO_LIMIT
    if msg_chat_type == ChatType.DIRECT:
        peer = peer_override(policy, user_id)
        if peer is not None and peer.history_limit is not None:
            return peer.history_limit
        return policy.dm_history_limit
    group = group_override(policy, chat_id)
    if group is not None and group.history_limit is not None:
        return group.history_limit
    return policy.history_limit


def history_limit_for(config: Config, origin: SessionOrigin | None) -> int:
    """The user-turn limit a person's turn in the session with this recorded origin uses, so
    internal calls (flush, heartbeat) send the same history and read the same cache entries."""
    if origin is None:  # a row older than origins whose key did not parse
        return NO_LIMIT
    return resolve_history_limit(
        config.channel_policy(origin.channel),
        origin.chat_type,
        origin.chat_id,
        origin.peer_id or "",
    )


def apply_turn_limit(items: Sequence[T], limit: int, is_user_turn: Callable[[T], bool]) -> list[T]:
    """Keep the last `limit` user turns and everything after the first of them.

    The result always starts with a user turn, so a model never sees a reply without the
    question; items before the first kept user turn are dropped even when `limit` exceeds
    the number of turns, so the cut behaves the same whatever the history length.
    `limit` 0 keeps everything.
    """
    if limit < 0:
        raise ValueError(f"history limit must be >= 0, got {limit}")
    if limit == NO_LIMIT:
        return list(items)
    start = len(items)
    seen = 0
    for index in range(len(items) - 1, -1, -1):
        if is_user_turn(items[index]):
            start = index
            seen += 1
            if seen == limit:
                break
    return list(items[start:])


def requires_mention(policy: ChannelPolicyConfig | None, chat_type: ChatType, chat_id: str) -> bool:
    """Whether the bot answers in this conversation only when addressed (never in a DM)."""
    if policy is None or chat_type == ChatType.DIRECT:
        return False
    group = group_override(policy, chat_id)
    if group is not None and group.require_mention is not None:
        return group.require_mention
    return policy.require_mention
