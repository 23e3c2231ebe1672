"""`[budgets]`: spending caps in US dollars for the whole bot, each person and each group
chat, per day and per month in `agent.timezone` (0 = no cap), when to warn, whether admins
are held to them, and whom a person over a cap should ask. Per-person and per-chat
overrides sit beside the history-limit overrides (`[telegram.dms."<id>"]`,
`[telegram.groups."<id>"]`, `[slack.dms."<id>"]`, `[slack.channels."<id>"]`)."""

from __future__ import annotations

from pydantic import Field

from bot.config.sections import Section


class BudgetsConfig(Section):
    daily_usd: float = Field(0.0, ge=0)  # the whole bot, every chat and kind of work
    monthly_usd: float = Field(0.0, ge=0)
    person_daily_usd: float = Field(0.0, ge=0)  # each person (a linked identity is one)
    person_monthly_usd: float = Field(0.0, ge=0)
    group_daily_usd: float = Field(0.0, ge=0)  # each group chat or Slack channel
    group_monthly_usd: float = Field(0.0, ge=0)
    # Share of a cap at which the person (their own cap) or the admins (the bot's and the
    # groups' caps) are told, once per period; 0 turns warnings off.
    warn_at: float = Field(0.8, ge=0, le=1)
    admins_capped: bool = False  # admins' own turns are never refused unless this is set
    # Whom a person over a cap should ask, in the reply they get ("" names the operator).
    contact: str = ""
