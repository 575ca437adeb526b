"""Writing results: `summary.csv`, `teams.csv`, a markdown table and plots."""

from __future__ import annotations

import csv
import os

from .metrics import COLUMNS, Outcome, percentile

HOUR = 3600
# Gang sizes of the per-size plot: (label, fewest GPUs, most GPUs).
SIZES = (("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), ("9-16", 9, 16), ("17-31", 17, 31),
         ("32+", 32, None))


def queue_by_size(outcome: Outcome) -> list[tuple[str, int, float, float]]:
    """Returns, per gang size of `SIZES`, (label, jobs, mean queueing delay,
    p99 queueing delay) in seconds; sizes no job has are left out."""
    rows = []
    for label, least, most in SIZES:
        queue = sorted(r.queue for r in outcome.records
                       if r.gpus >= least and (most is None or r.gpus <= most))
        if queue:
            rows.append((label, len(queue), sum(queue) / len(queue), percentile(queue, 0.99)))
    return rows


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
            "| guarantee kept | Jain (slowdown) |"
            + (" mean slowdown | offered load |" if by_team else
               " reserved idle GPU-h | p99 queue 32+ GPUs | max queue 32+ GPUs |"))
    lines = [head, "|" + "|".join(["---"] * (3 if by_team else 2)
                                   + ["--:"] * (15 if by_team else 16)) + "|"]
    for row in rows:
        note = (notes or {}).get((row["policy"], row["load"]), "")
        lines.append(
            f"| x{_load(row['load'])} | {row['policy']}{note} "
            + (f"| {row['team']} " if by_team else "") + f"| {row['jobs']:,} "
            f"| {_h(row['avg_jct'])} | {_h(row['p99_jct'])} | {_h(row['avg_queue'])} "
            f"| {_h(row['median_queue'])} | {_h(row['p99_queue'])} | {_h(row['makespan'])} "
            f"| {row['utilization']:.1%} | {row['preemptions']:,} | {row['lost_gpu_hours']:,.0f} "
            f"| {row['partial_gang_gpu_hours']:,.0f} | {row['guarantee_kept']:.1%} "
            f"| {row['jain_slowdown']:.3f} |"
            + (f" {row['avg_slowdown']:,.1f} | {row['offered_load']:.2f} |" if by_team else
               f" {row['reserved_idle_gpu_hours']:,.0f} "
               f"| {_h(row['p99_queue_big'])} | {_h(row['max_queue_big'])} |"))
    return "\n".join(lines) + "\n"


def type_lines(rows: list[dict[str, object]]) -> str:
    """Returns one line per policy and load of `types.csv` rows: each GPU
    type's GPUs, GPU-hours delivered and utilisation, in the cluster's order."""
    lines: dict[tuple[object, object], list[str]] = {}
    for row in rows:
        lines.setdefault((row["policy"], row["load"]), []).append(
            f"{row['gpu_type']} ({row['gpus']:,} GPUs) {row['gpu_hours']:,.0f} GPU-h delivered, "
            f"{row['utilization']:.1%} used")
    return "".join(f"- per GPU type, {policy} x{_load(load)}: {'; '.join(parts)}.\n"
                   for (policy, load), parts in lines.items())


def _h(seconds: object) -> str:
    return f"{float(seconds) / HOUR:,.2f} h"


def _load(load: object) -> str:
    return f"{float(load):g}"


def plot(outcomes: list[tuple[float, Outcome]], out_dir: str) -> list[str]:
    """Writes `queue_cdf.png` (queueing delay CDF per policy, one panel per
    load), `queue_by_size.png` (mean and p99 queueing delay per gang size and
    policy, one panel per load) and `team_use.png` (GPUs in use per team over
    time, gangway at the highest load when present); returns the paths
    written."""
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
    paths.append(_plot_sizes(plt, outcomes, loads, out_dir))

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


def _plot_sizes(plt, outcomes, loads, out_dir: str) -> str:
    """Writes `queue_by_size.png`: bars of the mean queueing delay per gang
    size and policy, a dot at the p99; returns its path."""
    fig, axes = plt.subplots(1, len(loads), figsize=(4.8 * len(loads), 3.6), squeeze=False)
    labels = [label for label, _, _ in SIZES]
    for ax, load in zip(axes[0], loads):
        chosen = [o for l, o in outcomes if l == load]
        width = 0.8 / max(1, len(chosen))
        for k, outcome in enumerate(chosen):
            rows = {label: (mean, p99) for label, _, mean, p99 in queue_by_size(outcome)}
            xs = [j + (k - (len(chosen) - 1) / 2) * width for j, label in enumerate(labels)
                  if label in rows]
            means = [max(rows[label][0], 1) / HOUR for label in labels if label in rows]
            p99s = [max(rows[label][1], 1) / HOUR for label in labels if label in rows]
            bars = ax.bar(xs, means, width, label=outcome.policy)
            ax.plot(xs, p99s, "o", markersize=3, color=bars.patches[0].get_facecolor()
                    if bars.patches else "black", markeredgecolor="black", markeredgewidth=0.4)
        ax.set_yscale("log")
        ax.set_ylim(bottom=1 / HOUR)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("gang size (GPUs)")
        ax.set_title(f"load x{_load(load)}: mean (bar) and p99 (dot)")
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("queueing delay (hours, log)")
    handles, names = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="lower center", ncol=min(5, len(names)))
    fig.tight_layout(rect=(0, 0.06 * (1 + (len(names) - 1) // 5), 1, 1))
    path = os.path.join(out_dir, "queue_by_size.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


__all__ = ["COLUMNS", "SIZES", "markdown", "plot", "queue_by_size", "type_lines", "write_csv"]
