"""SQL both stores run as written: SQLite takes its `?` placeholders, PostgreSQL numbers
them (bot/store/postgres/placeholders.py). Only portable SQL belongs here (booleans are
tested as `is_current` / `NOT is_current`, which both read the same)."""

from __future__ import annotations

import time
from typing import Any

from bot.store.base import InboundStatus
from bot.store.mapping import ENTRY_COLUMNS, USAGE_COLUMNS
from bot.store.shared_state import NO_LIMIT
from bot.transcript import EntryKind
from bot.types import Usage

# None leaves the context size or the last model call time as they are: one statement, so
# concurrent callers (in any process) never lose each other's increments.
ADD_USAGE = (
    "UPDATE sessions SET input_tokens = input_tokens + ?,"
    " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
    " cache_write_tokens = cache_write_tokens + ?,"
    " context_tokens = COALESCE(?, context_tokens), cost_usd = cost_usd + ?,"
    " last_model_call_at = COALESCE(?, last_model_call_at), updated_at = ?"
    " WHERE session_id = ?"
)
GET_CONTEXT_PLAN = "SELECT context_plan FROM sessions WHERE session_id = ?"
PUT_CONTEXT_PLAN = "UPDATE sessions SET context_plan = ? WHERE session_id = ?"
SET_MODEL = "UPDATE sessions SET model = ? WHERE session_id = ? AND model != ?"
COUNT_TURN = (
    "UPDATE sessions SET turns = turns + ?, errors = errors + ?, updated_at = ?"
    " WHERE session_id = ?"
)
TRANSCRIPT = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq"
USAGE_SINCE = (
    f"SELECT {USAGE_COLUMNS} FROM entries e JOIN sessions s ON s.session_id = e.session_id"
    f" WHERE e.kind = '{EntryKind.ASSISTANT_REPLY}' AND e.created_at >= ?"
    " AND e.usage IS NOT NULL ORDER BY e.created_at"
)
# Inserted for a job never run; otherwise updated only when the last run is old enough, so
# of several processes claiming the same due moment exactly one write takes effect.
CLAIM_JOB = (
    "INSERT INTO scheduler_runs(job, last_run_at) VALUES (?, ?)"
    " ON CONFLICT(job) DO UPDATE SET last_run_at = excluded.last_run_at"
    " WHERE scheduler_runs.last_run_at <= ?"
)
FINISH_REMINDER = "UPDATE reminders SET status = ?, fired_at = ? WHERE id = ? AND status = ?"

# Shared state and budgets. A budget row is kept this long after its window ended (at most
# one row per sender and budget).
BUDGET_KEPT_SECONDS = 86_400.0
PUT_STATE = (
    "INSERT INTO shared_state(scope, key, value, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT(scope, key) DO UPDATE SET value = excluded.value,"
    " expires_at = excluded.expires_at"
)
GET_STATE = "SELECT value FROM shared_state WHERE scope = ? AND key = ? AND expires_at > ?"
# A window that has ended starts afresh at this use; an open one counts up unless full (then
# the WHERE makes the update a no-op and nothing is returned).
TAKE_BUDGET = (
    "INSERT INTO budgets(budget, sender, used, resets_at) VALUES (?, ?, 1, ?)"
    " ON CONFLICT(budget, sender) DO UPDATE SET"
    " used = CASE WHEN budgets.resets_at <= ? THEN 1 ELSE budgets.used + 1 END,"
    " resets_at = CASE WHEN budgets.resets_at <= ? THEN excluded.resets_at"
    " ELSE budgets.resets_at END"
    " WHERE budgets.resets_at <= ? OR budgets.used < ?"
    " RETURNING used, resets_at"
)
BUDGET_USE = "SELECT used, resets_at FROM budgets WHERE budget = ? AND sender = ? AND resets_at > ?"

# Retention, each step with the cutoff as its one argument and named for the Pruned field
# it counts; entries go before the sessions they belong to. Inbound rows still needed to
# answer someone stay: recovery after a restart reads them.
_OLD_SESSIONS = "FROM sessions WHERE NOT is_current AND updated_at < ?"
PRUNE_STEPS = (
    (
        "inbound",
        "DELETE FROM inbound WHERE updated_at < ?"
        f" AND status NOT IN ('{InboundStatus.PENDING}', '{InboundStatus.PROCESSING}')",
    ),
    ("outbox", "DELETE FROM outbox WHERE status = 'sent' AND updated_at < ?"),
    ("buffered", "DELETE FROM group_buffer WHERE created_at < ?"),
    ("entries", f"DELETE FROM entries WHERE session_id IN (SELECT session_id {_OLD_SESSIONS})"),
    ("sessions", f"DELETE {_OLD_SESSIONS}"),
)


def usage_args(
    session_id: str, usage: Usage, context_tokens: int | None, cost_usd: float, at: float | None
) -> tuple[Any, ...]:
    """The arguments of ADD_USAGE."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        context_tokens,
        cost_usd,
        at,
        time.time() if at is None else at,
        session_id,
    )


def count_turn_args(session_id: str, turns: int, errors: int) -> tuple[Any, ...]:
    """The arguments of COUNT_TURN."""
    return turns, errors, time.time(), session_id


def take_budget_args(
    budget: str, sender: str, limit: int | None, window: float, now: float
) -> tuple[Any, ...]:
    """The arguments of TAKE_BUDGET (`limit=None`: count the use whatever the count is)."""
    cap = NO_LIMIT if limit is None else limit
    return budget, sender, now + window, now, now, now, cap
