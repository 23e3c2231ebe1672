"""The overview row above the sessions list: this process's version, uptime, turns in the
last hour, their error rate and p50/p95 latency, from the metrics Krill keeps."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from markupsafe import Markup

from bot import __version__
from bot.console.layout import count, join, percent
from bot.metrics import TurnFigures


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def uptime(seconds: float) -> str:
    return str(dt.timedelta(seconds=int(seconds)))


def overview_row(
    turns: Callable[[float], TurnFigures], started_at: float, now: float | None = None
) -> Markup:
    now = time.time() if now is None else now
    figures = turns(now)
    rate = figures.errors / figures.turns if figures.turns else 0.0
    cells = (
        ("version", "Version", __version__),
        ("uptime", "Up for", uptime(now - started_at)),
        ("turns", "Turns, last hour", count(figures.turns)),
        ("errors", "Error rate", percent(rate)),
        ("p50", "Latency p50", _seconds(figures.p50)),
        ("p95", "Latency p95", _seconds(figures.p95)),
    )
    return Markup('<div class="cards overview" data-testid="overview">{}</div>').format(
        join(
            Markup(
                '<div class="card"><h2>{}</h2><p class="big" data-testid="overview-{}">{}</p></div>'
            ).format(label, key, value)
            for key, label, value in cells
        )
    )
