"""One comparison: read the jobs, replay every policy at every load, write
the results. Shared by `manage.py replay` and `bench/replay.py`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .engine import replay
from .metrics import COLUMNS, TEAM_COLUMNS, TYPE_COLUMNS, Outcome, summarize, summarize_teams, summarize_types
from .policies import POLICIES, TUNABLE, TUNED
from .progress import bar
from .report import markdown, plot, type_lines, write_csv
from .runtimes import ESTIMATES
from .trace import Trace, TraceError, read_teams, read_trace, synthetic, synthetic_teams
from .world import ANY_TYPE, PARTITIONS, build_world, parse_types

# The published comparisons' window of the Philly trace: October and November 2017.
WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:59")
TEAM_COUNT = 10  # teams of a synthetic cluster of --nodes, unless --team-count says


def traces_dir() -> Path:
    """Returns where the shared traces are: `GANGWAY_TRACES_DIR`, else
    `shared/traces` beside the repository."""
    configured = os.environ.get("GANGWAY_TRACES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2].parent / "shared" / "traces"


@dataclass(frozen=True, slots=True)
class Config:
    trace: str | None
    vc: str | None
    synthetic: int | None = None
    seed: int = 1
    # The synthetic cluster: None nodes = synthetic()'s own small one.
    nodes: int | None = None
    team_count: int = TEAM_COUNT
    span_days: float = 1.0
    policies: tuple[str, ...] = tuple(POLICIES)
    loads: tuple[float, ...] = (1.0,)
    out: str | None = None
    start: str | None = None
    until: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    checkpoint_interval: int = 1800
    progress: bool = True
    teams: bool = False
    estimates: str = "history"
    partition: str = "shared"
    types: tuple[tuple[str, int], ...] = ()  # (GPU type, nodes), cheapest first; () = untyped
    any_type: float = ANY_TYPE
    # (setting, value) that gangway and gangway-hold replay under instead of the default
    settings: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Result:
    # (load, outcome, wall seconds, CPU seconds of this process)
    outcomes: tuple[tuple[float, Outcome, float, float], ...]
    rows: tuple[dict, ...]
    bad: int
    table: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the replay's options to `parser` (the command and the benchmark share them)."""
    parser.add_argument("--trace", help="trace CSV (default: philly.csv in the shared traces)")
    parser.add_argument("--vc", help="team sizes CSV, 'vc,node num' (default: philly_vc.csv)")
    parser.add_argument("--synthetic", type=int, metavar="N",
                        help="replay N synthetic jobs instead of a trace file")
    parser.add_argument("--seed", type=int, default=1, help="seed of tiers and synthetic jobs")
    parser.add_argument("--nodes", type=int,
                        help="with --synthetic: a cluster of this many 8-GPU nodes shared by "
                             "--team-count teams (default: 8 nodes, 3 teams)")
    parser.add_argument("--team-count", type=int,
                        help="with --synthetic --nodes: how many teams, sized a few large and "
                             f"many small (default {TEAM_COUNT})")
    parser.add_argument("--span", type=float, metavar="DAYS",
                        help="with --synthetic: submit times spread over this many days before "
                             "--load compresses them (default 1)")
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES),
                        help="a policy to replay; repeat it (default: all)")
    parser.add_argument("--load", action="append", type=float,
                        help="compress submit times by this factor; repeat it (default: 1)")
    parser.add_argument("--out", help="folder for summary.csv, teams.csv, summary.md and plots")
    parser.add_argument("--from", dest="start", help="first submit time, 'YYYY-MM-DD HH:MM:SS'")
    parser.add_argument("--until", help="last submit time, 'YYYY-MM-DD HH:MM:SS'")
    parser.add_argument("--columns", default="",
                        help="map fields to the file's headers, e.g. num_gpus=gpus,cluster=vc")
    parser.add_argument("--checkpoint-interval", type=int, default=1800,
                        help="seconds between checkpoints; 0 = nothing is lost on preemption")
    parser.add_argument("--estimates", choices=ESTIMATES, default="history",
                        help="R14 runtimes in gangway's snapshots: learned from successes "
                             "(history), each job's true duration as its max_runtime (oracle, "
                             "an upper bound), or none (default_runtime for all)")
    parser.add_argument("--partition", choices=PARTITIONS, default="shared",
                        help="shared: quotas over shared nodes; nodes: each team owns whole "
                             "nodes, where the isolated baselines place its jobs")
    parser.add_argument("--types", default="",
                        help="a cluster of GPU types instead: type:nodes of 8 GPUs, cheapest first, "
                             "e.g. l4:256,a100:96; quotas split by capacity, each job prefers a "
                             "type drawn with --seed")
    parser.add_argument("--any-type", type=float, default=ANY_TYPE,
                        help=f"with --types, the share of jobs accepting every type (default {ANY_TYPE})")
    parser.add_argument("--set", dest="policy_settings", action="append", metavar="NAME=SECONDS",
                        help="replay gangway and gangway-hold with this policy setting instead "
                             f"of its default; repeat it; one of {', '.join(TUNABLE)} "
                             "(max_reservations is a count); their rows name it")
    parser.add_argument("--teams", action="store_true", help="also print the table per team")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def config_from(options: dict) -> Config:
    """Returns the config for parsed options; raises TraceError naming a bad one."""
    columns = []
    for pair in filter(None, (options.get("columns") or "").split(",")):
        field, _, header = pair.partition("=")
        if not header:
            raise TraceError(f"--columns: expected field=header, got {pair!r}")
        columns.append((field.strip(), header.strip()))
    _check_synthetic(options)
    folder = traces_dir()
    return Config(
        trace=options.get("trace") or str(folder / "philly.csv"),
        vc=options.get("vc") or str(folder / "philly_vc.csv"),
        synthetic=options.get("synthetic"),
        seed=options.get("seed", 1),
        nodes=options.get("nodes"),
        team_count=options.get("team_count") or TEAM_COUNT,
        span_days=options.get("span") or 1.0,
        policies=tuple(options.get("policy") or POLICIES),
        loads=tuple(options.get("load") or (1.0,)),
        out=options.get("out"),
        start=options.get("start"),
        until=options.get("until"),
        columns=tuple(columns),
        checkpoint_interval=options.get("checkpoint_interval", 1800),
        progress=not options.get("quiet"),
        teams=bool(options.get("teams")),
        estimates=options.get("estimates") or "history",
        partition=options.get("partition") or "shared",
        types=parse_types(options.get("types") or ""),
        any_type=ANY_TYPE if options.get("any_type") is None else options["any_type"],
        settings=_settings(options.get("policy_settings") or ()),
    )


def _settings(pairs) -> tuple[tuple[str, int], ...]:
    """Returns `--set` pairs as (setting, value) in the order given; raises
    TraceError naming an unknown setting, a value that is not a whole
    number of at least 0, or a setting given twice."""
    found: dict[str, int] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        name = name.strip()
        if name not in TUNABLE:
            raise TraceError(f"--set {pair}: the setting must be one of {', '.join(TUNABLE)}")
        if name in found:
            raise TraceError(f"--set {name}: given twice")
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0:
            raise TraceError(f"--set {pair}: expected {name}=N, N a whole number of at least 0")
        found[name] = number
    return tuple(found.items())


def _check_synthetic(options: dict) -> None:
    """Raises TraceError naming a synthetic cluster option given without
    what it needs, or out of range."""
    given = [f"--{name.replace('_', '-')}" for name in ("nodes", "team_count", "span")
             if options.get(name) is not None]
    if given and options.get("synthetic") is None:
        raise TraceError(f"{', '.join(given)}: only for a synthetic trace; add --synthetic N")
    if options.get("team_count") is not None and options.get("nodes") is None:
        raise TraceError("--team-count splits the nodes of --nodes: add --nodes N")
    nodes, count = options.get("nodes"), options.get("team_count") or TEAM_COUNT
    if nodes is not None and not 1 <= count <= nodes:
        raise TraceError(f"--team-count must be between 1 and --nodes ({nodes}), got {count}")
    span = options.get("span")
    if span is not None and not span > 0:
        raise TraceError(f"--span must be a positive number of days, got {span:g}")


def load_jobs(config: Config, load: float) -> Trace:
    """Returns the jobs of `config` compressed by `load`."""
    if config.synthetic is not None:
        teams = None if config.nodes is None else synthetic_teams(config.nodes, config.team_count)
        return synthetic(config.synthetic, config.seed, teams, load=load,
                         span=round(config.span_days * 86400))
    teams = read_teams(config.vc)
    return read_trace(config.trace, teams, load=load, start=config.start, until=config.until,
                      columns=dict(config.columns))


def run(config: Config, err=None) -> Result:
    """Replays every policy at every load; writes the files when `config.out`
    is set (and `types.csv` on a cluster with GPU types); returns the
    outcomes, the summary rows and the markdown table, followed by one line
    per policy and load with each type's figures when there are types."""
    err = err or sys.stderr
    outcomes = []
    rows, team_rows, type_rows = [], [], []
    notes = {}
    bad = 0
    for load in config.loads:
        trace = load_jobs(config, load)
        if trace.bad and load == config.loads[0]:
            bad = len(trace.bad)
            err.write(f"Skipped {bad} bad rows: " + "; ".join(
                f"line {b.line}: {b.reason}" for b in trace.bad[:5])
                + ("; ..." if bad > 5 else "") + "\n")
        world = build_world(trace, config.seed, partition=config.partition,
                            estimates=config.estimates, types=config.types, any_type=config.any_type)
        for name in config.policies:
            if config.settings and name in TUNED:
                policy = POLICIES[name](world, config.settings)
            else:
                policy = POLICIES[name](world)
            began, cpu = time.perf_counter(), time.process_time()
            progress = bar(f"{name} x{load:g}", err) if config.progress else None
            outcome = replay(trace.jobs, world, policy,
                             checkpoint_interval=config.checkpoint_interval, progress=progress)
            outcomes.append((load, outcome, time.perf_counter() - began,
                             time.process_time() - cpu))
            rows.append(summarize(outcome, load))
            team_rows.extend(summarize_teams(outcome, load))
            type_rows.extend(summarize_types(outcome, load))
            notes[(outcome.policy, load)] = _note(outcome)
    table = markdown(rows, notes)
    if type_rows:
        table += "\n" + type_lines(type_rows)
    if config.teams:
        table += "\n" + markdown(team_rows)
    if config.out:
        os.makedirs(config.out, exist_ok=True)
        write_csv(os.path.join(config.out, "summary.csv"), rows, COLUMNS)
        write_csv(os.path.join(config.out, "teams.csv"), team_rows, TEAM_COLUMNS)
        if type_rows:
            write_csv(os.path.join(config.out, "types.csv"), type_rows, TYPE_COLUMNS)
        with open(os.path.join(config.out, "summary.md"), "w", encoding="utf-8") as handle:
            handle.write(table)
        plot([(load, outcome) for load, outcome, _, _ in outcomes], config.out)
    return Result(tuple(outcomes), tuple(rows), bad, table)


def _note(outcome: Outcome) -> str:
    """Returns what the table must say beside a policy: rejections, deadlock."""
    parts = []
    if outcome.rejected:
        parts.append(f"{outcome.rejected:,} rejected")
    if outcome.stuck:
        parts.append(f"deadlock: {outcome.stuck:,} never start")
    return f" ({'; '.join(parts)})" if parts else ""
