"""Writing results: `summary.csv`, `teams.csv`, a markdown table and plots."""

from __future__ import annotations

import csv
import os

from .metrics import COLUMNS, Outcome

HOUR = 3600


def write_csv(path: str, rows: list[dict[str, object]], columns: tuple[str, ...]) -> None:
    """Writes `rows` with exactly `columns`, floats rounded to 4 decimals."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row[c]) for c in columns])


def _cell(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def markdown(rows: list[dict[str, object]], notes: dict[tuple[str, float], str] | None = None) -> str:
    """Returns the per-policy table for people (per team when the rows carry a
    `team`): times in hours, shares in percent."""
    by_team = bool(rows) and "team" in rows[0]
    head = ("| load | policy |" + (" team |" if by_team else "") + " jobs | avg JCT | p99 JCT | avg queue | median queue | p99 queue "
            "| makespan | GPU use | preemptions | lost GPU-h | partial-gang GPU-h "
            "| guarantee kept | Jain (slowdown) |")
    lines = [head, "|" + "|".join(["---"] * (3 if by_team else 2) + ["--:"] * 13) + "|"]
    for row in rows:
        note = (notes or {}).get((row["policy"], row["load"]), "")
        lines.append(
            f"| x{_load(row['load'])} | {row['policy']}{note} "
            + (f"| {row['team']} " if by_team else "") + f"| {row['jobs']:,} "
            f"| {_h(row['avg_jct'])} | {_h(row['p99_jct'])} | {_h(row['avg_queue'])} "
            f"| {_h(row['median_queue'])} | {_h(row['p99_queue'])} | {_h(row['makespan'])} "
            f"| {row['utilization']:.1%} | {row['preemptions']:,} | {row['lost_gpu_hours']:,.0f} "
            f"| {row['partial_gang_gpu_hours']:,.0f} | {row['guarantee_kept']:.1%} "
            f"| {row['jain_slowdown']:.3f} |")
    return "\n".join(lines) + "\n"


def _h(seconds: object) -> str:
    return f"{float(seconds) / HOUR:,.2f} h"


def _load(load: object) -> str:
    return f"{float(load):g}"


def plot(outcomes: list[tuple[float, Outcome]], out_dir: str) -> list[str]:
    """Writes `queue_cdf.png` (queueing delay CDF per policy, one panel per
    load) and `team_use.png` (GPUs in use per team over time, gangway at the
    highest load when present); returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({load for load, _ in outcomes})
    fig, axes = plt.subplots(1, len(loads), figsize=(4.2 * len(loads), 3.4), squeeze=False)
    for ax, load in zip(axes[0], loads):
        for _, outcome in (o for o in outcomes if o[0] == load):
            delays = sorted(max(r.queue, 1) / HOUR for r in outcome.records)
            if delays:
                ys = [(k + 1) / len(delays) for k in range(len(delays))]
                ax.step(delays, ys, where="post", label=outcome.policy, linewidth=1.2)
        ax.set_xscale("log")
        ax.set_xlim(left=1 / HOUR)
        ax.set_title(f"load x{_load(load)}")
        ax.set_xlabel("queueing delay (hours, log)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of jobs")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    paths = [os.path.join(out_dir, "queue_cdf.png")]
    fig.savefig(paths[0], dpi=80)
    plt.close(fig)

    chosen = max((o for o in outcomes if o[1].policy == "gangway"), default=None,
                 key=lambda o: o[0]) or outcomes[-1]
    load, outcome = chosen
    if outcome.times:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        days = [(t - outcome.first_submit) / 86400 for t in outcome.times]
        series = list(zip(*outcome.use))
        palette = plt.get_cmap("tab20").colors  # one fixed colour per team, in team order
        ax.stackplot(days, series, labels=outcome.teams, linewidth=0,
                     colors=palette[: len(outcome.teams)])
        ax.axhline(outcome.capacity, color="black", linewidth=0.8)
        ax.set_xlabel("days since the first submit")
        ax.set_ylabel("GPUs in use")
        ax.set_title(f"{outcome.policy}, load x{_load(load)}: GPUs in use per team")
        ax.legend(fontsize=6, ncol=2, loc="upper right")
        fig.tight_layout()
        paths.append(os.path.join(out_dir, "team_use.png"))
        fig.savefig(paths[-1], dpi=80)
        plt.close(fig)
    return paths


__all__ = ["COLUMNS", "markdown", "plot", "write_csv"]
