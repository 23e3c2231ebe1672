"""bot.sessions.breaker: when a session's compaction pauses, and for how long."""

from __future__ import annotations

from bot.sessions.breaker import (
    CLOSED,
    FIRST_PAUSE_SECONDS,
    MAX_PAUSE_SECONDS,
    after_failure,
    is_paused,
    paused_until_text,
)

NOW = 1_800_000_000.0


def test_the_third_failure_in_a_row_pauses_for_five_minutes_doubling_to_an_hour() -> None:
    first = after_failure(CLOSED.failures, NOW, max_failures=3)
    second = after_failure(first.failures, NOW, max_failures=3)
    assert (first.paused_until, second.paused_until) == (None, None)
    state, pauses = second, []
    for _ in range(6):
        state = after_failure(state.failures, NOW, max_failures=3)
        assert state.paused_until is not None
        pauses.append(state.paused_until - NOW)
    assert FIRST_PAUSE_SECONDS == 300 and MAX_PAUSE_SECONDS == 3600
    assert pauses == [300, 600, 1200, 2400, 3600, 3600]
    assert state.failures == 8


def test_paused_only_until_the_moment_it_names() -> None:
    until = NOW + 300
    assert is_paused(until, NOW) and is_paused(until, until - 1)
    assert not is_paused(until, until) and not is_paused(None, NOW)
    assert paused_until_text(None) is None
    assert paused_until_text(until) == "2027-01-15T08:05:00+00:00"
