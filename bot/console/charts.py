"""Small inline SVG charts: stacked bars and a line over labelled points. They scale to
their container through the viewBox, so they never widen a page; colours come from the
stylesheet's series classes so the page's CSP needs no inline style."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.console.layout import esc

WIDTH, HEIGHT = 480, 180
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 60, 22, 12
SERIES_CLASSES = 6  # .s0 … .s5 in console.css


def _frame(title: str, top_label: str, labels: Sequence[str], inner: str, legend: str) -> str:
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = max(1, -(-len(labels) // 5))
    width = (WIDTH - PAD_LEFT) / max(1, len(labels))
    ticks = "".join(
        f'<text x="{PAD_LEFT + width * (i + 0.5):.1f}" y="{HEIGHT - 6}" '
        f'text-anchor="middle">{esc(label)}</text>'
        for i, label in enumerate(labels)
        if i % step == 0
    )
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(title)}">'
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH}" '
        f'y2="{PAD_TOP + plot_h}"/>'
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + 4}" text-anchor="end">{esc(top_label)}</text>'
        f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end">0</text>'
        f"{inner}{ticks}</svg>{legend}</figure>"
    )


def _legend(names: Sequence[str]) -> str:
    items = "".join(
        f'<li><span class="swatch s{i % SERIES_CLASSES}"></span>{esc(name)}</li>'
        for i, name in enumerate(names)
    )
    return f'<ul class="legend">{items}</ul>'


def stacked_bars(
    title: str,
    labels: Sequence[str],
    series: dict[str, list[float]],
    fmt: Callable[[float], str],
) -> str:
    """Bars per label, each stacked from the series' values (a legend names the series)."""
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top = max(totals, default=0.0) or 1.0
    width = (WIDTH - PAD_LEFT) / max(1, len(labels))
    bars = []
    for i, label in enumerate(labels):
        y = float(PAD_TOP + plot_h)
        for n, (name, values) in enumerate(series.items()):
            h = values[i] / top * plot_h
            if h <= 0:
                continue
            y -= h
            bars.append(
                f'<rect class="s{n % SERIES_CLASSES}" x="{PAD_LEFT + width * i + width * 0.15:.1f}"'
                f' y="{y:.1f}" width="{width * 0.7:.1f}" height="{h:.1f}">'
                f"<title>{esc(label)} {esc(name)}: {esc(fmt(values[i]))}</title></rect>"
            )
    return _frame(title, fmt(top), labels, "".join(bars), _legend(list(series)))


def line(
    title: str, labels: Sequence[str], values: Sequence[float | None], fmt: Callable[[float], str]
) -> str:
    """A line through the values (None: no point there), scaled to 0…max (at least 1)."""
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    top = max([v for v in values if v is not None] + [1.0])
    width = (WIDTH - PAD_LEFT) / max(1, len(labels))
    points = [
        (PAD_LEFT + width * (i + 0.5), PAD_TOP + plot_h - v / top * plot_h, labels[i], v)
        for i, v in enumerate(values)
        if v is not None
    ]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in points)
    dots = "".join(
        f'<circle class="s0" cx="{x:.1f}" cy="{y:.1f}" r="3">'
        f"<title>{esc(label)}: {esc(fmt(v))}</title></circle>"
        for x, y, label, v in points
    )
    inner = (f'<polyline class="line" points="{path}"/>' if len(points) > 1 else "") + dots
    return _frame(title, fmt(top), labels, inner, "")
