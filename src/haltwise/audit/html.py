"""``--html FILE``: one self-contained page (inline SVG and CSS, no scripts, nothing fetched).

- *Spend over steps*, one chart per corpus: each run's cumulative spend (dollars when every run
  of the corpus is priced, else tokens) against its steps, solved runs in one colour and the
  others in another, with a mark where haltwise would have stopped the run;
- *The trade-off*: spend saved on unsolved runs against solved runs cut, as the thresholds of
  the limits sweep from half to three times their values;
- the totals, and the runs that would have been stopped, with why.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from .replay import RunResult
from .report import Saved, Totals

__all__ = ["SweepPoint", "render_page"]

#: At most this many runs are drawn per chart (every stopped run, then the others in order).
MAX_LINES = 250

_SOLVED = "#2a9d8f"
_UNSOLVED = "#9a9a9a"
_UNKNOWN = "#b7a3d6"
_STOP = "#d62828"

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
code { background: #f3f3f3; padding: 0 .25rem; }
.legend span { display: inline-block; margin-right: 1.2rem; }
.swatch { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem;
          vertical-align: middle; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
.muted { color: #777; }
"""


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One setting of the threshold sweep: its factor, its limits, and their totals."""

    factor: float
    limits: str
    totals: Totals


def _escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(high: float, count: int = 5) -> list[float]:
    if high <= 0:
        return [0.0]
    raw = high / count
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    if raw < 1:
        magnitude = 10.0**-1
        while magnitude * 10 > raw * 10 and magnitude > 1e-6:
            magnitude /= 10
    step = next((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw), 10 * magnitude)
    ticks, value = [], 0.0
    while value <= high * 1.0001:
        ticks.append(value)
        value += step
    return ticks


def _number(value: float, money: bool) -> str:
    if money:
        return f"${value:,.2f}" if value < 100 else f"${value:,.0f}"
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _spend_chart(results: Sequence[RunResult]) -> str:
    """Cumulative spend against steps for each run, with the halt marked."""
    money = all(
        result.cost is not None and all(value is not None for value in result.cost_by_step)
        for result in results
    ) and any(result.cost for result in results)
    has_tokens = any(result.tokens for result in results)
    if not money and not has_tokens:
        return '<p class="muted">No usage was recorded for these runs: nothing to plot.</p>'
    chosen = [result for result in results if result.stopped]
    chosen += [result for result in results if not result.stopped]
    chosen = chosen[:MAX_LINES]

    def series(result: RunResult) -> list[float]:
        if money:
            return [float(value or 0.0) for value in result.cost_by_step]
        return [float(value) for value in result.tokens_by_step]

    width, height, left, bottom, top, right = 760, 320, 64, 34, 12, 16
    steps = max((result.steps for result in chosen), default=1) or 1
    highest = max((max(series(result), default=0.0) for result in chosen), default=1.0) or 1.0

    def x(step: float) -> float:
        return left + (width - left - right) * step / steps

    def y(value: float) -> float:
        return height - bottom - (height - bottom - top) * value / highest

    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for tick in _ticks(highest):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="#eee"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
            f"{_escape(_number(tick, money))}</text>"
        )
    for tick in _ticks(steps):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
            f"{tick:g}</text>"
        )
    parts.append(
        f'<text x="{(left + width) / 2:.0f}" y="{height - 4}" text-anchor="middle">step</text>'
    )
    marks = []
    for result in reversed(chosen):
        values = series(result)
        if not values:
            continue
        resolved = result.meta.resolved
        colour = _SOLVED if resolved else _UNSOLVED if resolved is False else _UNKNOWN
        points = " ".join(
            f"{x(step):.1f},{y(value):.1f}" for step, value in enumerate([0.0, *values])
        )
        title = _escape(f"{result.meta.run_id} ({result.meta.model or 'model unknown'})")
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1" '
            f'stroke-opacity="0.55"><title>{title}</title></polyline>'
        )
        if result.stop_step is not None:
            at = values[result.stop_step - 1] if result.stop_step >= 1 else 0.0
            why = _escape(f"{result.meta.run_id}: {result.stop_reason} at step {result.stop_step}")
            marks.append(
                f'<circle cx="{x(result.stop_step):.1f}" cy="{y(at):.1f}" r="3.2" '
                f'fill="{_STOP}"><title>{why}</title></circle>'
            )
    parts.extend(marks)
    unit = "dollars" if money else "tokens"
    parts.append(
        f'<text x="12" y="{(height - bottom) / 2:.0f}" transform="rotate(-90 12 '
        f'{(height - bottom) / 2:.0f})" text-anchor="middle">{unit}</text></svg>'
    )
    shown = "" if len(chosen) == len(results) else f" ({len(chosen)} of {len(results)} runs)"
    return "".join(parts) + f'<p class="muted">Cumulative {unit} per run{shown}.</p>'


def _tradeoff_chart(points: Sequence[SweepPoint]) -> str:
    if not points:
        return ""
    width, height, left, bottom, top, right = 560, 320, 56, 40, 14, 24

    def coordinates(point: SweepPoint) -> tuple[float, float]:
        totals = point.totals
        cut = 100 * totals.solved_cut / totals.solved.runs if totals.solved.runs else 0.0
        share = totals.unsolved.share("tokens")
        if share is None:
            share = totals.unsolved.share("steps")
        return cut, 100 * (share or 0.0)

    values = [coordinates(point) for point in points]
    high_x = max(max(value[0] for value in values), 1.0)
    high_y = max(max(value[1] for value in values), 1.0)

    def x(value: float) -> float:
        return left + (width - left - right) * value / high_x

    def y(value: float) -> float:
        return height - bottom - (height - bottom - top) * value / high_y

    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for tick in _ticks(high_y):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#eee"/><text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
            f"{tick:g}%</text>"
        )
    for tick in _ticks(high_x):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
            f"{tick:g}%</text>"
        )
    parts.append(
        f'<text x="{(left + width) / 2:.0f}" y="{height - 6}" text-anchor="middle">'
        "solved runs cut</text>"
        f'<text x="12" y="{(height - bottom) / 2:.0f}" transform="rotate(-90 12 '
        f'{(height - bottom) / 2:.0f})" text-anchor="middle">spend saved on unsolved runs</text>'
    )
    path = " ".join(f"{x(cut):.1f},{y(saved):.1f}" for cut, saved in values)
    parts.append(f'<polyline points="{path}" fill="none" stroke="#264653" stroke-width="1.5"/>')
    for point, (cut, saved) in zip(points, values, strict=True):
        chosen = point.factor == 1
        parts.append(
            f'<circle cx="{x(cut):.1f}" cy="{y(saved):.1f}" r="{5 if chosen else 3.5}" '
            f'fill="{_STOP if chosen else "#264653"}"><title>{_escape(point.limits)}: '
            f"{cut:.1f}% cut, {saved:.1f}% saved</title></circle>"
            f'<text x="{x(cut) + 7:.1f}" y="{y(saved) - 6:.1f}">&#215;{point.factor:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _totals_table(groups: Sequence[tuple[str, Totals]]) -> str:
    head = (
        "<tr><th>group</th><th>runs</th><th>stopped</th><th>solved cut</th>"
        "<th>unsolved stopped</th><th>steps saved</th><th>tokens saved</th><th>$ saved</th>"
        "<th>on limit: stopped</th><th>tokens saved</th><th>$ saved</th></tr>"
    )
    rows = [head]
    for name, totals in groups:
        unsolved, limit = totals.unsolved, totals.on_limit

        def money(saved: Decimal, part: Saved) -> str:
            if part.runs and part.cost_unknown == part.runs:
                return "cost unknown"
            unknown = f" (+{part.cost_unknown} unknown)" if part.cost_unknown else ""
            return f"${saved:,.2f}{unknown}"

        rows.append(
            "<tr>"
            + "".join(
                f"<td>{_escape(cell)}</td>"
                for cell in (
                    name,
                    totals.runs,
                    totals.stopped,
                    f"{totals.solved_cut}/{totals.solved.runs}",
                    f"{unsolved.stopped}/{unsolved.runs}",
                    f"{unsolved.saved_steps:,}",
                    f"{unsolved.saved_tokens:,}",
                    money(unsolved.saved_cost, unsolved),
                    f"{limit.stopped}/{limit.runs}",
                    f"{limit.saved_tokens:,}",
                    money(limit.saved_cost, limit),
                )
            )
            + "</tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def render_page(
    *,
    limits: str,
    results: Sequence[RunResult],
    groups: Sequence[tuple[str, Totals]],
    sweep: Sequence[SweepPoint] = (),
    errors: Sequence[str] = (),
) -> str:
    """The whole page, as one string."""
    corpora: dict[str, list[RunResult]] = {}
    for result in results:
        corpora.setdefault(result.meta.corpus, []).append(result)
    body = [
        f"<h1>haltwise audit: <code>{_escape(limits)}</code></h1>",
        f"<p>{len(results)} runs replayed from {len(corpora)} corpora.</p>",
        "<h2>Totals</h2>",
        _totals_table(groups),
    ]
    if sweep:
        body += [
            "<h2>The trade-off as thresholds sweep</h2>",
            "<p>Each point scales every threshold of the limits; "
            "&#215;1 is the setting audited.</p>",
            _tradeoff_chart(sweep),
        ]
    legend = (
        '<p class="legend">'
        f'<span><i class="swatch" style="background:{_SOLVED}"></i>solved</span>'
        f'<span><i class="swatch" style="background:{_UNSOLVED}"></i>not solved</span>'
        f'<span><i class="swatch" style="background:{_UNKNOWN}"></i>no label</span>'
        f'<span><i class="swatch" style="background:{_STOP};border-radius:50%"></i>'
        "where haltwise stops</span></p>"
    )
    body.append("<h2>Spend over steps</h2>" + legend)
    for corpus, members in sorted(corpora.items()):
        body += [f"<h3>{_escape(corpus)}</h3>", _spend_chart(members)]
    stopped = [result for result in results if result.stopped]
    if stopped:
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{_escape(cell)}</td>"
                for cell in (
                    f"{result.meta.corpus}/{result.meta.run_id}",
                    {True: "solved", False: "not solved", None: "?"}[result.meta.resolved],
                    f"{result.stop_step} of {result.steps}",
                    result.stop_reason,
                    result.stop_message,
                )
            )
            + "</tr>"
            for result in stopped
        )
        body += [
            "<h2>Where runs would have stopped</h2>",
            "<table><tr><th>run</th><th>label</th><th>step</th><th>reason</th>"
            f"<th>why</th></tr>{rows}</table>",
        ]
    if errors:
        body += ["<h2>Files that could not be read</h2><ul>"]
        body += [f"<li>{_escape(error)}</li>" for error in errors]
        body += ["</ul>"]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>haltwise audit</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
