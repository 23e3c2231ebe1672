"""Small inline SVG charts: stacked bars and a line over labelled points. They scale to
their container through the viewBox, so they never widen a page; colours come from the
stylesheet's series classes so the page's CSP needs no inline style."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup

from bot.console.layout import join

WIDTH, HEIGHT = 480, 180
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 60, 22, 12
SERIES_CLASSES = 6  # .s0 … .s5 in console.css


def _frame(
    title: str, top_label: str, labels: Sequence[str], inner: Markup, legend: Markup
) -> Markup:
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = max(1, -(-len(labels) // 5))
    width = (WIDTH - PAD_LEFT) / max(1, len(labels))
    ticks = join(
        Markup('<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>').format(
            PAD_LEFT + width * (i + 0.5), HEIGHT - 6, label
        )
        for i, label in enumerate(labels)
        if i % step == 0
    )
    return Markup(
        '<figure class="chart"><figcaption>{title}</figcaption>'
        '<svg viewBox="0 0 {width} {height}" role="img" aria-label="{title}">'
        '<line class="axis" x1="{left}" y1="{bottom}" x2="{width}" y2="{bottom}"/>'
        '<text x="{label_x}" y="{label_y}" text-anchor="end">{top_label}</text>'
        '<text x="{label_x}" y="{bottom}" text-anchor="end">0</text>'
        "{inner}{ticks}</svg>{legend}</figure>"
    ).format(
        title=title,
        width=WIDTH,
        height=HEIGHT,
        left=PAD_LEFT,
        bottom=PAD_TOP + plot_h,
        label_x=PAD_LEFT - 4,
        label_y=PAD_TOP + 4,
        top_label=top_label,
        inner=inner,
        ticks=ticks,
        legend=legend,
    )


def _legend(names: Sequence[str]) -> Markup:
    items = join(
        Markup('<li><span class="swatch s{}"></span>{}</li>').format(i % SERIES_CLASSES, name)
        for i, name in enumerate(names)
    )
    return Markup('<ul class="legend">{}</ul>').format(items)


def stacked_bars(
    title: str,
    labels: Sequence[str],
    series: dict[str, list[float]],
    fmt: Callable[[float], str],
) -> Markup:
    """Bars per label, each stacked from the series' values (a legend names the series)."""
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top = max(totals, default=0.0) or 1.0
    width = (WIDTH - PAD_LEFT) / max(1, len(labels))
    bars: list[Markup] = []
    for i, label in enumerate(labels):
        y = float(PAD_TOP + plot_h)
        for n, (name, values) in enumerate(series.items()):
            h = values[i] / top * plot_h
            if h <= 0:
                continue
            y -= h
            bars.append(
                Markup(
                    '<rect class="s{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}">'
                    "<title>{} {}: {}</title></rect>"
                ).format(
                    n % SERIES_CLASSES,
                    PAD_LEFT + width * i + width * 0.15,
                    y,
                    width * 0.7,
                    h,
                    label,
                    name,
                    fmt(values[i]),
                )
            )
    return _frame(title, fmt(top), labels, join(bars), _legend(list(series)))


def line(
    title: str, labels: Sequence[str], values: Sequence[float | None], fmt: Callable[[float], str]
) -> Markup:
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
    dots = join(
        Markup(
            '<circle class="s0" cx="{:.1f}" cy="{:.1f}" r="3"><title>{}: {}</title></circle>'
        ).format(x, y, label, fmt(v))
        for x, y, label, v in points
    )
    line = Markup('<polyline class="line" points="{}"/>').format(path) if len(points) > 1 else ""
    return _frame(title, fmt(top), labels, line + dots, Markup(""))
