"""Which spending caps a model call counts against, and what people are told about them:
pure functions over the config.

Every call counts for the whole bot, for its person (a linked identity is one person across
channels) and, in a group chat, for that chat, each per day and per month. A cap is
`[budgets]`'s, or a per-person (`dms."<id>"`) or per-chat (`groups."<id>"`,
`channels."<id>"`) override; 0 is no cap.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from bot.config import Config
from bot.sessions.access import is_admin
from bot.sessions.keys import linked_name
from bot.sessions.limits import group_override, peer_override
from bot.spending.periods import Period, PeriodKind, describe_reset, periods_of
from bot.store.costs import SpendKey
from bot.types import ChatType, Payer, SessionOrigin

BOT_SCOPE = "bot"
ADJECTIVE = {PeriodKind.DAY: "daily", PeriodKind.MONTH: "monthly"}


class ScopeKind(StrEnum):
    BOT = "bot"
    PERSON = "person"
    CHAT = "chat"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a sum of spending is kept for: the bot, one person, or one group chat."""

    kind: ScopeKind
    name: str  # "bot", "person:<person>", "chat:<channel>:<chat_id>"


@dataclass(frozen=True, slots=True)
class Cap:
    scope: Scope
    period: PeriodKind
    limit_usd: float


def person_of(principal: str, identity_links: dict[str, list[str]]) -> str:
    """The person `<channel>:<user_id>` is: a linked identity's name, else the id itself."""
    return linked_name(principal, identity_links) or principal


def payer_for(
    config: Config,
    *,
    session_id: str,
    origin: SessionOrigin | None,
    principal: str = "",
    turn_id: str = "",
) -> Payer:
    """Whom a call in the session with `origin` is charged to: `principal`, the person who
    wrote (a person's turn), else the person of a direct chat; no one in a group."""
    if origin is None:  # a row older than origins: only the bot's sums apply
        return Payer(session_id, "", "", turn_id=turn_id)
    direct = origin.chat_type == ChatType.DIRECT
    if not principal and direct and origin.peer_id:
        principal = f"{origin.channel}:{origin.peer_id}"
    return Payer(
        session_id=session_id,
        channel=origin.channel,
        chat=f"{origin.channel}:{origin.chat_id or origin.peer_id or ''}",
        person=person_of(principal, config.session.identity_links) if principal else "",
        principal=principal,
        group=not direct,
        turn_id=turn_id,
    )


def scopes_of(payer: Payer) -> list[Scope]:
    """Every sum a call of `payer` adds to."""
    scopes = [Scope(ScopeKind.BOT, BOT_SCOPE)]
    if payer.person:
        scopes.append(Scope(ScopeKind.PERSON, f"person:{payer.person}"))
    if payer.group:
        scopes.append(Scope(ScopeKind.CHAT, f"chat:{payer.chat}"))
    return scopes


def sums_of(payer: Payer, at: float, zone: dt.tzinfo) -> tuple[SpendKey, ...]:
    """The sums a call of `payer` at `at` adds to: each of its scopes, today and this month."""
    periods = periods_of(at, zone)
    return tuple(
        SpendKey(scope.name, period.key) for scope in scopes_of(payer) for period in periods
    )


def exempt(config: Config, payer: Payer) -> bool:
    """Whether `payer`'s turns run whatever the caps say (an admin, unless admins_capped)."""
    budgets = config.budgets
    return (
        bool(payer.principal)
        and not budgets.admins_capped
        and is_admin(payer.principal, config.admin)
    )


def _person_limit(config: Config, payer: Payer, period: PeriodKind) -> float:
    field = f"person_{ADJECTIVE[period]}_usd"
    links = config.session.identity_links.get(payer.person, [])
    for principal in dict.fromkeys([payer.principal, *links]):
        channel, _, user_id = principal.partition(":")
        policy = config.channel_policy(channel)
        override = peer_override(policy, user_id) if policy is not None else None
        value = getattr(override, field, None) if override is not None else None
        if value is not None:
            return float(value)
    return float(getattr(config.budgets, field))


def _chat_limit(config: Config, payer: Payer, period: PeriodKind) -> float:
    field = f"group_{ADJECTIVE[period]}_usd"
    policy = config.channel_policy(payer.channel)
    chat_id = payer.chat.partition(":")[2]
    override = group_override(policy, chat_id) if policy is not None else None
    value = getattr(override, field, None) if override is not None else None
    return float(value if value is not None else getattr(config.budgets, field))


def cap_limit(config: Config, scope: Scope, payer: Payer, period: PeriodKind) -> float:
    """The cap on `scope` for `period` as it applies to `payer` (0: none)."""
    if scope.kind == ScopeKind.PERSON:
        return _person_limit(config, payer, period)
    if scope.kind == ScopeKind.CHAT:
        return _chat_limit(config, payer, period)
    return float(getattr(config.budgets, f"{ADJECTIVE[period]}_usd"))


def caps_for(config: Config, payer: Payer) -> list[Cap]:
    """The caps a call of `payer` counts against (those set above 0)."""
    caps = []
    for scope in scopes_of(payer):
        for period in PeriodKind:
            limit = cap_limit(config, scope, payer, period)
            if limit > 0:
                caps.append(Cap(scope, period, limit))
    return caps


# --------------------------------------------------------------------------- what people see


def usd(amount: float) -> str:
    """Dollars as a person reads them: cents, or tenths of a cent below ten cents."""
    return f"${amount:,.2f}" if amount >= 0.1 or amount == 0 else f"${amount:.3f}"


def cap_name(cap: Cap, *, to_admins: bool = False) -> str:
    """ "your daily spending cap", "this chat's monthly spending cap", "the bot's …"."""
    adjective = ADJECTIVE[cap.period]
    if cap.scope.kind == ScopeKind.PERSON:
        owner = f"{cap.scope.name.partition(':')[2]}'s" if to_admins else "your"
    elif cap.scope.kind == ScopeKind.CHAT:
        owner = f"chat {cap.scope.name.partition(':')[2]}'s" if to_admins else "this chat's"
    else:
        owner = "the bot's"
    return f"{owner} {adjective} spending cap"


def over_cap_text(cap: Cap, period: Period, zone: dt.tzinfo, contact: str) -> str:
    """The one reply a person over a cap gets in a period."""
    ask = contact.strip() or "the operator of this bot"
    return (
        f"⛔ I can't answer for now: {cap_name(cap)} of {usd(cap.limit_usd)} has been "
        f"reached. It resets {describe_reset(period, zone)}. If you need more before then, "
        f"ask {ask}. Messages you send meanwhile are not answered."
    )


def warning_text(cap: Cap, used: float, period: Period, zone: dt.tzinfo, *, to_admins: bool) -> str:
    """The once-a-period note that `used` has passed `budgets.warn_at` of `cap`."""
    share = used / cap.limit_usd
    return (
        f"ℹ️ {usd(used)} of {cap_name(cap, to_admins=to_admins)} of {usd(cap.limit_usd)} is "
        f"used ({share:.0%}). It resets {describe_reset(period, zone)}."
    )


def reached_text(cap: Cap, used: float, period: Period, zone: dt.tzinfo) -> str:
    """What admins are told once when the bot's or a chat's cap is reached."""
    name = cap_name(cap, to_admins=True)
    return (
        f"⛔ {name[0].upper()}{name[1:]} of {usd(cap.limit_usd)} is reached ({usd(used)} "
        f"spent): turns it covers are refused, except admins', until it resets "
        f"{describe_reset(period, zone)}."
    )
