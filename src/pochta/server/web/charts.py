"""Charts drawn on the server as SVG (pure functions; no script, no CDN, no library).

The pages' CSP forbids inline ``style`` attributes, so everything here is drawn with SVG
presentation attributes (``fill``, ``width``...), which are markup, not CSS. Every text is
escaped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = {
    "ham": "#3a9d5d",
    "spam": "#d08a1e",
    "phishing": "#c0392b",
    "logical": "#2f6db5",
    "stored": "#8e44ad",
    "physical": "#7f8c8d",
    "bar": "#2f6db5",
}


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    color: str
    points: Sequence[tuple[float, float]]  # (x, y)


def _svg(parts: list[str]) -> Markup:
    """The drawing as markup: every text in ``parts`` went through ``escape`` and every
    number through a format, so nothing a letter or a user wrote can be markup."""
    return Markup("".join(parts) + "</svg>")  # noqa: S704


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 10
    for k in (1, 2, 2.5, 5, 10):
        if value <= k * step:
            return float(k * step)
    return float(10 * step)  # pragma: no cover


def _when(x: float) -> str:
    return time.strftime("%d.%m %H:%M", time.gmtime(x))


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    y_label: Callable[[float], str] = lambda v: f"{v:g}",
    width: int = 640,
    height: int = 220,
) -> Markup:
    """Lines over time (x: epoch seconds), with a legend, three y ticks and the first and
    last time under the x axis. A single point is drawn as a dot."""
    left, right, top, bottom = 70, 10, 24, 36
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{escape(title)}</title>",
    ]
    if not xs:
        parts.append(f'<text x="{left}" y="{height / 2:.0f}" fill="#666">no data yet</text>')
        return _svg(parts)
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1.0
    y_max = _nice_max(max(ys))
    w, h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / span * w if x1 > x0 else left + w / 2

    def py(y: float) -> float:
        return top + h - y / y_max * h

    for k in range(4):
        v = y_max * k / 3
        parts.append(
            f'<line x1="{left}" x2="{left + w}" y1="{py(v):.1f}" y2="{py(v):.1f}" '
            f'stroke="#ddd"/><text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end" '
            f'font-size="11" fill="#555">{escape(y_label(v))}</text>'
        )
    parts.append(
        f'<text x="{left}" y="{height - 8}" font-size="11" fill="#555">{_when(x0)}</text>'
        f'<text x="{left + w}" y="{height - 8}" font-size="11" fill="#555" '
        f'text-anchor="end">{_when(x1)}</text>'
    )
    for i, s in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        if len(s.points) == 1:
            (x, y) = s.points[0]
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{s.color}"/>')
        elif s.points:
            parts.append(
                f'<polyline points="{pts}" fill="none" stroke="{s.color}" stroke-width="2"/>'
            )
        lx = left + i * 160
        parts.append(
            f'<rect x="{lx}" y="6" width="12" height="12" fill="{s.color}"/>'
            f'<text x="{lx + 16}" y="16" font-size="12">{escape(s.name)}</text>'
        )
    return _svg(parts)


def stacked_bars(
    hours: Sequence[int],
    stacks: Sequence[Series],
    *,
    title: str,
    width: int = 640,
    height: int = 220,
) -> Markup:
    """One bar per hour (hours since the epoch), each series stacked on the previous ones;
    a series' points are (hour, count)."""
    left, right, top, bottom = 50, 10, 24, 36
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{escape(title)}</title>",
    ]
    counts = {s.name: dict(s.points) for s in stacks}
    totals = [sum(counts[s.name].get(hr, 0) for s in stacks) for hr in hours]
    if not hours or not any(totals):
        parts.append(f'<text x="{left}" y="{height / 2:.0f}" fill="#666">no letters yet</text>')
        return _svg(parts)
    y_max = float(-(-max(totals) // 3) * 3)  # a multiple of 3: the ticks are whole letters
    w, h = width - left - right, height - top - bottom
    slot = w / len(hours)
    for k in range(4):
        v = y_max * k / 3
        y = top + h - v / y_max * h
        parts.append(
            f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#555">{v:g}</text>'
        )
    for i, hr in enumerate(hours):
        base = 0.0
        for s in stacks:
            n = counts[s.name].get(hr, 0)
            if not n:
                continue
            y0 = top + h - (base + n) / y_max * h
            bh = n / y_max * h
            parts.append(
                f'<rect x="{left + i * slot + 1:.1f}" y="{y0:.1f}" '
                f'width="{max(slot - 2, 1):.1f}" height="{bh:.1f}" fill="{s.color}">'
                f"<title>{escape(s.name)}: {n:g} ({_when(hr * 3600)} UTC)</title></rect>"
            )
            base += n
    parts.append(
        f'<text x="{left}" y="{height - 8}" font-size="11" fill="#555">'
        f"{_when(hours[0] * 3600)}</text>"
        f'<text x="{left + w}" y="{height - 8}" font-size="11" fill="#555" '
        f'text-anchor="end">{_when(hours[-1] * 3600)}</text>'
    )
    for i, s in enumerate(stacks):
        lx = left + i * 120
        parts.append(
            f'<rect x="{lx}" y="6" width="12" height="12" fill="{s.color}"/>'
            f'<text x="{lx + 16}" y="16" font-size="12">{escape(s.name)}</text>'
        )
    return _svg(parts)


def hbars(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    width: int = 720,
    tips: Sequence[str] | None = None,
) -> Markup:
    """Horizontal bars, one per (label, value), longest first as given; ``tips``: a longer
    text for each bar, shown on hover."""
    row, label_w = 22, 340
    height = max(row * len(items) + 8, 30)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
        f"<title>{escape(title)}</title>",
    ]
    if not items:
        parts.append('<text x="0" y="20" fill="#666">nothing yet</text>')
        return _svg(parts)
    top = max(v for _, v in items) or 1
    for i, (label, value) in enumerate(items):
        y = 4 + i * row
        bw = (width - label_w - 60) * value / top
        shown = label if len(label) <= 46 else label[:45] + "…"
        tip = tips[i] if tips is not None else label
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="12">'
            f"{escape(shown)}<title>{escape(tip)}</title></text>"
            f'<rect x="{label_w}" y="{y + 2}" width="{bw:.1f}" height="16" '
            f'fill="{PALETTE["bar"]}"/><text x="{label_w + bw + 6:.1f}" y="{y + 14}" '
            f'font-size="12">{value:g}</text>'
        )
    return _svg(parts)
