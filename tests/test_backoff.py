"""The one backoff policy of reconnect and restart loops."""

from __future__ import annotations

from bot.backoff import Backoff, backoff_delay


def test_backoff_doubles_up_to_a_cap() -> None:
    backoff = Backoff(1, 30)
    assert [backoff.next() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(10_000, 1, 30) == 30


def test_a_success_starts_the_backoff_over() -> None:
    backoff = Backoff(0.5, 10)
    backoff.next(), backoff.next()
    backoff.reset()
    assert backoff.failures == 0 and backoff.next() == 0.5
