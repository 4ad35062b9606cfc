"""The NE-vs-FLOPs picture of a search: every candidate, the front, the baselines, the knee.

A pure function of a ``SearchSummary``; the controller logs it to the parent MLflow run as
``pareto.png``. Plots the first two objectives (with more, the front over all of them is
marked, without the 2-D staircase); FLOPs-like axes use a log scale.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only; never open a window

from matplotlib.figure import Figure  # noqa: E402

LOG_SCALE = ("flops", "serving_flops", "params")


def pareto_figure(summary, title: str) -> Figure:
    x_name, y_name = summary.objectives[1], summary.objectives[0]  # cost across, quality up

    def xy(candidates):
        return [c.values[1] for c in candidates], [c.values[0] for c in candidates]

    figure = Figure(figsize=(7, 4.5), dpi=120)
    ax = figure.subplots()
    searched = [c for c in summary.candidates if not c.is_baseline]
    baselines = [c for c in summary.candidates if c.is_baseline]
    ax.scatter(*xy(searched), s=18, color="0.6", label="searched candidates")
    front = sorted(summary.front, key=lambda c: c.values[1])
    if len(summary.objectives) == 2:
        # The attainment staircase: everything beyond it is dominated.
        where = "post" if summary.directions[1] == "min" else "pre"
        ax.step(*xy(front), where=where, color="tab:blue")
    label = "Pareto front" + ("" if len(summary.objectives) == 2 else " (all objectives)")
    ax.scatter(*xy(front), s=24, color="tab:blue", label=label)
    if baselines:
        ax.scatter(*xy(baselines), marker="s", s=40, color="tab:orange", label="baselines")
        for c in baselines:
            ax.annotate(
                c.label,
                (c.values[1], c.values[0]),
                fontsize=8,
                xytext=(4, 4),
                textcoords="offset points",
            )
    if summary.knee is not None:
        ax.scatter(*xy([summary.knee]), marker="*", s=160, color="tab:red", label="knee", zorder=5)
    if x_name in LOG_SCALE:
        ax.set_xscale("log")
    ax.set_xlabel(f"{x_name} ({summary.directions[1]}imise)")
    ax.set_ylabel(f"{y_name} ({summary.directions[0]}imise)")
    ax.set_title(f"{title}: hypervolume {summary.hypervolume:.4g}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure
