"""Access decisions: may this sender reach the agent here, and DM pairing codes.

Pure policy logic over `ChannelPolicyConfig`; the pairing store and replies live elsewhere.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from bot.config import AdminConfig, ChannelPolicyConfig
from bot.sessions.limits import group_override
from bot.types import ChatType, InboundMessage

AccessAction = Literal["allow", "deny", "pair", "ignore"]

# No 0/O or 1/I, so a code read off a phone screen is typed back correctly.
PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
PAIRING_CODE_LENGTH = 8
PAIRING_TTL_SECONDS = 3600
MAX_PENDING_PAIRINGS = 3

WILDCARD = "*"
# The host's own terminal and web chat (channels/local); it has no access policy.
LOCAL_CHANNEL = "local"


@dataclass(frozen=True)
class AccessDecision:
    """What to do with a message: `allow` it, `deny` it (refuse), start `pair`ing, or `ignore` it.

    `reason` is short and goes into logs.
    """

    action: AccessAction
    reason: str

    @property
    def allowed(self) -> bool:
        return self.action == "allow"


def _in_allow_from(msg: InboundMessage, allow_from: Iterable[str]) -> bool:
    # Entries are bare user ids; the `<channel>:<user_id>` form used by admin.users is
    # accepted too, so an operator who copies that habit is not locked out.
    bare = msg.user_id.strip().casefold()
    principal = msg.principal.strip().casefold()
    for entry in allow_from:
        wanted = entry.strip().casefold()
        if wanted == WILDCARD or (wanted and wanted in (bare, principal)):
            return True
    return False


def check_access(
    msg: InboundMessage,
    policy: ChannelPolicyConfig | None,
    *,
    is_admin: bool,
    is_paired: bool,
) -> AccessDecision:
    """Apply the channel's DM or group policy to `msg`.

    DMs that fail answer `deny` (the sender may be told) or `pair`; groups that fail answer
    `ignore`, because the bot stays silent in rooms it is not meant to serve.
    """
    if policy is None:  # the local channel is the operator's own terminal or browser
        return AccessDecision("allow", "local channel")
    if is_admin:
        return AccessDecision("allow", "admin")

    if msg.chat_type == ChatType.DIRECT:
        dm = policy.dm_policy
        if dm == "disabled":
            return AccessDecision("deny", "DMs disabled")
        if dm == "open":
            return AccessDecision("allow", "DMs open")
        if _in_allow_from(msg, policy.allow_from):
            return AccessDecision("allow", "in allow_from")
        if dm == "allowlist":
            return AccessDecision("deny", "not in allow_from")
        if is_paired:
            return AccessDecision("allow", "paired")
        return AccessDecision("pair", "not paired")

    override = group_override(policy, msg.chat_id)
    allow = override.allow if override is not None else None
    where = "channel" if msg.chat_type == ChatType.CHANNEL else "group"
    if policy.group_policy == "disabled":
        return AccessDecision("ignore", f"{where}s disabled")
    if policy.group_policy == "allowlist":
        if allow is True:
            return AccessDecision("allow", f"{where} allowlisted")
        return AccessDecision("ignore", f"{where} not allowlisted")
    if allow is False:
        return AccessDecision("ignore", f"{where} blocked by override")
    return AccessDecision("allow", f"{where}s open")


def is_admin(principal: str, admin: AdminConfig) -> bool:
    """Whether `<channel>:<user_id>` is an admin: a local-channel user while
    `admin.local_is_admin` holds, or anyone listed in `admin.users`.

    Case-insensitive: Telegram ids are digits, and Slack ids are upper-case but easy to
    paste in lower case; no two real ids differ only by case.
    """
    wanted = principal.strip().casefold()
    if admin.local_is_admin and wanted.partition(":")[0] == LOCAL_CHANNEL:
        return True
    return any(entry.strip().casefold() == wanted for entry in admin.users)


def how_to_grant_admin(principal: str) -> str:
    """The operator's step that makes `principal` an admin, for refusals to quote."""
    step = f'add "{principal}" to admin.users in krill.toml'
    if principal.partition(":")[0] == LOCAL_CHANNEL:
        step += " (or set admin.local_is_admin = true)"
    return step


def how_to_let_in(msg: InboundMessage, policy: ChannelPolicyConfig | None) -> str:
    """The operator's step that lets the sender of a refused DM in, for the refusal and the
    log to quote: their id in the channel's allowlist, or (where DMs are off) admin.users."""
    if policy is not None and policy.dm_policy == "disabled":
        return f'add "{msg.principal}" to admin.users'
    return f'add "{msg.user_id}" to {msg.channel}.allow_from (or "{msg.principal}" to admin.users)'


class Reach(StrEnum):
    """Who could ever reach the bot on a channel."""

    DIRECT = "direct"  # an admin, or anyone DMs admit (open, pairing, a non-empty allowlist)
    GROUPS_ONLY = "groups only"  # group mentions are answered, but no DM ever is
    NOBODY = "nobody"


def reach(policy: ChannelPolicyConfig, channel: str, admin: AdminConfig) -> Reach:
    """Who could ever talk to the bot on `channel` under `policy` and `admin.users`."""
    if any(entry.strip().casefold().startswith(f"{channel}:") for entry in admin.users):
        return Reach.DIRECT
    if policy.dm_policy in ("open", "pairing") or (
        policy.dm_policy == "allowlist" and any(e.strip() for e in policy.allow_from)
    ):
        return Reach.DIRECT
    if policy.group_policy == "open" or (
        policy.group_policy == "allowlist"
        and any(o.allow for o in policy.group_overrides().values())
    ):
        return Reach.GROUPS_ONLY
    return Reach.NOBODY


def reach_advice(channel: str, policy: ChannelPolicyConfig, found: Reach) -> str:
    """What is closed on a channel short of `Reach.DIRECT`, and how the owner gets in."""
    if policy.dm_policy == "disabled":
        dms = f'{channel}.dm_policy is "disabled"'
    else:
        dms = f'{channel}.dm_policy is "{policy.dm_policy}" with an empty {channel}.allow_from'
    fix = (
        f'add "{channel}:<your id>" to admin.users (KRILL_ADMIN__USERS, or `krill init --owner '
        f'{channel}:<your id>`), or set {channel}.dm_policy = "pairing"; a refused DM tells '
        "the sender their id"
    )
    if found is Reach.NOBODY:
        return (
            f"no one can ever talk to the bot on {channel}: {dms}, admin.users names no "
            f"{channel} user, and groups are closed ({channel}.group_policy = "
            f'"{policy.group_policy}"); {fix}'
        )
    return (
        f"no one can DM the bot on {channel}, not even its owner: {dms} and admin.users "
        f"names no {channel} user; {fix}"
    )


def all_admins(messages: Iterable[InboundMessage], admin: AdminConfig) -> bool:
    """Whether a turn answers only admins: messages queued while the bot was busy are
    answered together, and one of them may come from someone else. No messages (internal
    turns) is not an admin's turn."""
    senders = [m.principal for m in messages]
    return bool(senders) and all(is_admin(p, admin) for p in senders)


def new_pairing_code(rng: random.Random | None = None) -> str:
    """A fresh pairing code; `rng` makes it reproducible in tests, else `secrets` is used."""
    choose = rng.choice if rng is not None else secrets.choice
    return "".join(choose(PAIRING_ALPHABET) for _ in range(PAIRING_CODE_LENGTH))


def normalize_code(text: str) -> str:
    """A code as a person typed it, in the form it was issued."""
    return text.strip().upper()
