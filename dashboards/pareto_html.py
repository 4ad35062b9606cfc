"""Interactive pictures of a search, on one self-contained HTML page (plotly): the parent
MLflow run logs it as ``pareto.html``.

``pareto_figure``: every completed candidate (searched ones grey, the front blue with its
staircase, baselines orange squares, the knee a red star), hovering shows label, arch_id,
NE, AUC, FLOPs, params and its MLflow run id. With more than two objectives, a
menu switches the pair of axes (each pair's own front and staircase).

``progress_figure``: hypervolume and best first objective against minutes since the search
started, after each recorded candidate.

``retrain_figure``: a retrain's test NE per architecture, with seed error bars
(``retrain.html`` on the retrain's run).

Pure functions of registry rows and a ``SearchSummary``; nothing here talks to MLflow.
"""

from __future__ import annotations

from html import escape
from itertools import combinations

import numpy as np

from nas.search.pareto import front_indices, hypervolume

LOG_SCALE = ("flops", "serving_flops", "params")


def _hover(c, link: str | None) -> str:
    m = c.metrics
    # plotly's hover text is HTML: a spec's name is the user's text, shown as written
    parts = [f"<b>{escape(c.label)}</b>", f"arch_id {c.arch_id}", f"trial {c.number}"]
    for key, fmt in (("ne", ".4f"), ("auc", ".4f"), ("flops", ".4s"), ("params", ".4s")):
        if m.get(key) is not None:
            parts.append(f"{key} {format(m[key], fmt) if fmt != '.4s' else _si(m[key])}")
    for key in ("serving_flops", "latency_ms"):
        if m.get(key) is not None:
            parts.append(f"{key} {_si(m[key])}")
    if link:
        parts.append(f"run {link}")
    return "<br>".join(parts)


def _si(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.4g}"


def pareto_figure(summary, title: str, links: dict[int, str] | None = None):
    """A plotly Figure; ``links``: trial number -> URL of its MLflow run."""
    import plotly.graph_objects as go

    links = links or {}
    names = summary.objectives
    # cost across, quality up; one objective: against the trial number
    pairs = [(x, y) for y, x in combinations(range(len(names)), 2)] or [(None, 0)]
    candidates = summary.candidates
    searched = [c for c in candidates if not c.is_baseline]
    baselines = [c for c in candidates if c.is_baseline]
    figure = go.Figure()

    def add(group, name, marker, mode="markers"):
        figure.add_trace(
            go.Scatter(
                x=[],
                y=[],
                mode=mode,
                name=name,
                marker=marker,
                text=[_hover(c, links.get(c.number)) for c in group],
                hovertemplate="%{text}<extra></extra>",
                customdata=[c.arch_id for c in group],
            )
        )

    add(searched, "searched candidates", {"color": "#9a9a9a", "size": 7})
    add(baselines, "baselines", {"color": "#f28e2b", "size": 11, "symbol": "square"})
    add([], "Pareto front", {"color": "#4e79a7", "size": 9}, mode="lines+markers")
    add(
        [summary.knee] if summary.knee else [],
        "knee",
        {"color": "#e15759", "size": 18, "symbol": "star"},
    )
    views = []
    for x, y in pairs:
        views.append(_view(summary, x, y, searched, baselines, links))
    _apply(figure, views[0])
    if len(views) > 1:
        figure.update_layout(
            updatemenus=[
                {
                    "buttons": [
                        {"label": f"{names[y]} vs {names[x]}", "method": "update", "args": view}
                        for (x, y), view in zip(pairs, views, strict=True)
                    ],
                    "x": 1.0,
                    "y": 1.15,
                    "xanchor": "right",
                }
            ]
        )
    figure.update_layout(
        title=f"{title}: {len(candidates)} candidates, hypervolume {summary.hypervolume:.4g}",
        template="plotly_white",
        hoverlabel={"align": "left"},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def _view(summary, x: int, y: int, searched, baselines, links) -> list[dict]:
    """The restyle + relayout of one pair of objectives: data of the four traces, axes."""
    names, directions = summary.objectives, summary.directions
    candidates = summary.candidates

    def across(c) -> float:
        return c.number if x is None else c.values[x]

    if x is None:  # one objective: its best point is the front
        values, senses = np.array([[c.values[y]] for c in candidates]), [directions[y]]
    else:
        values = np.array([[c.values[x], c.values[y]] for c in candidates])
        senses = [directions[x], directions[y]]
    on_front = [candidates[i] for i in front_indices(values, senses)]
    on_front.sort(key=lambda c: across(c) * (1 if x is None or directions[x] == "min" else -1))
    stair_x, stair_y, text = [], [], []
    for k, c in enumerate(on_front):  # the attainment staircase through the front
        if k and x is not None:
            stair_x.append(across(c))
            stair_y.append(on_front[k - 1].values[y])
            text.append("")
        stair_x.append(across(c))
        stair_y.append(c.values[y])
        text.append(_hover(c, links.get(c.number)))
    knee = [summary.knee] if summary.knee else []
    groups = [searched, baselines, None, knee]
    data = {
        "x": [[across(c) for c in g] if g is not None else stair_x for g in groups],
        "y": [[c.values[y] for c in g] if g is not None else stair_y for g in groups],
        "text": [
            [_hover(c, links.get(c.number)) for c in g] if g is not None else text for g in groups
        ],
    }
    layout = {
        "xaxis": {
            "title": {"text": "trial" if x is None else f"{names[x]} ({directions[x]}imise)"},
            "type": "log" if x is not None and names[x] in LOG_SCALE else "linear",
        },
        "yaxis": {
            "title": {"text": f"{names[y]} ({directions[y]}imise)"},
            "type": "log" if names[y] in LOG_SCALE else "linear",
        },
    }
    return [data, layout]


def _apply(figure, view) -> None:
    data, layout = view
    for k, trace in enumerate(figure.data):
        trace.x, trace.y, trace.text = data["x"][k], data["y"][k], data["text"][k]
    figure.update_layout(**layout)


def progress_figure(summary, trials, title: str):
    """Hypervolume and the best first objective after each recorded candidate, against
    minutes since the first trial was suggested, over the objectives and reference of
    ``summary`` (a ``SearchSummary``). Empty without two completed candidates."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    done = sorted(
        (t for t in trials if t.is_candidate and t.status == "completed" and t.timings),
        key=lambda t: t.timings.get("recorded_at", 0),
    )
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    if done:
        start = min(t.timings.get("suggested_at", t.timings["recorded_at"]) for t in done)
        names, directions, reference = summary.objectives, summary.directions, summary.reference
        minutes, volumes, best = [], [], []
        for k in range(len(done)):
            values = np.array([[t.metrics[n] for n in names] for t in done[: k + 1]])
            minutes.append((done[k].timings["recorded_at"] - start) / 60)
            volumes.append(hypervolume(values, directions, reference) if reference else 0.0)
            first = values[:, 0]
            best.append(float(first.min() if directions[0] == "min" else first.max()))
        figure.add_trace(
            go.Scatter(
                x=minutes, y=volumes, mode="lines+markers", line_shape="hv", name="hypervolume"
            ),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=minutes, y=best, mode="lines+markers", line_shape="hv", name=f"best {names[0]}"
            ),
            row=2,
            col=1,
        )
        figure.update_yaxes(title_text="hypervolume", row=1, col=1)
        figure.update_yaxes(title_text=f"best {names[0]}", row=2, col=1)
    figure.update_xaxes(title_text="minutes since the search started", row=2, col=1)
    figure.update_layout(title=f"{title}: progress", template="plotly_white")
    return figure


def page(title: str, *figures) -> str:
    """One page that opens anywhere, offline: plotly.js inlined once, then each figure."""
    parts = [
        figure.to_html(full_html=False, include_plotlyjs=(k == 0))
        for k, figure in enumerate(figures)
    ]
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        "</head><body>" + "".join(parts) + "</body></html>"
    )


def retrain_figure(report: dict):
    """A retrain's comparison: test NE per architecture, mean with one standard deviation
    over seeds as error bars, baselines and picks in two colours (from ``retrain.json``); the
    NE it ranks by (one label's, ``ne:click``, when the search named one)."""
    import plotly.graph_objects as go

    rows, key = report["rows"], report.get("ranked_by", "ne")
    shown = "test NE" if key == "ne" else f"test NE of {key.partition(':')[2]}"
    figure = go.Figure()
    for baseline, name, color in ((False, "picked", "#4e79a7"), (True, "baselines", "#f28e2b")):
        group = [r for r in rows if r["baseline"] == baseline]
        figure.add_trace(
            go.Bar(
                x=[r["label"] for r in group],
                y=[r[f"{key}_mean"] for r in group],
                error_y={"type": "data", "array": [r[f"{key}_std"] for r in group]},
                name=name,
                marker_color=color,
                text=[f"{r[f'{key}_mean']:.4f}" for r in group],
                hovertemplate="%{x}: NE %{y:.4f}<extra></extra>",
            )
        )
    low = min((r[f"{key}_mean"] - r[f"{key}_std"] for r in rows), default=0.0)
    high = max((r[f"{key}_mean"] + r[f"{key}_std"] for r in rows), default=1.0)
    pad = (high - low) * 0.5 or 0.01
    figure.update_layout(
        title=f"retrain of {report['retrain_of']}: {shown} over {report['seeds']} seeds, "
        f"{report['steps']} steps (lower is better)",
        yaxis={"title": {"text": shown}, "range": [low - pad, high + pad]},
        template="plotly_white",
    )
    return figure


def probabilities_figure(trajectory: dict, title: str):
    """A DNAS run's architecture probabilities over its steps: one panel per decision, a
    line per choice, softmax of the logits at temperature 1 (what ``probabilities.json``
    holds at the end). ``trajectory``: the job's ``{"step", "alpha": {decision: {choice:
    [logit per step]}}}``."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    decisions = trajectory["alpha"]
    figure = make_subplots(
        rows=len(decisions),
        cols=1,
        shared_xaxes=True,
        subplot_titles=list(decisions),
        vertical_spacing=min(0.08, 0.3 / max(1, len(decisions))),
    )
    for row, choices in enumerate(decisions.values(), start=1):
        logits = np.array(list(choices.values()))  # [choices, steps]
        shifted = np.exp(logits - logits.max(0))
        probabilities = shifted / shifted.sum(0)
        for choice, series in zip(choices, probabilities, strict=True):
            figure.add_trace(
                go.Scatter(
                    x=trajectory["step"],
                    y=series,
                    mode="lines",
                    name=choice,
                    legendgroup=str(row),
                    hovertemplate=f"{choice}: %{{y:.3f}} at step %{{x}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
        figure.update_yaxes(range=[0, 1], row=row, col=1)
    figure.update_xaxes(title_text="step", row=len(decisions), col=1)
    figure.update_layout(
        title=f"{title}: architecture probabilities",
        template="plotly_white",
        height=160 * len(decisions) + 120,
        showlegend=False,
    )
    return figure
