"""R14 in the replay: the runtimes a snapshot carries for each job.

How the replay fills `max_runtime` and `estimate` (`--estimates`):

- `history` (the default): what the admission loop learns. No job states a
  `max_runtime`; a job's `estimate` is the median runtime of the last 5
  jobs of its team and GPU count that succeeded, when there are at least 2,
  capped at `default_runtime` (a trace has one kind of job, so the loop's
  team, kind and GPU count is team and GPU count here). A runtime is the
  last run's, start to finish, as the loop reads it.
- `oracle`: every job's `max_runtime` is its true duration from the trace:
  an upper bound on what estimates can give, never a result to quote.
- `none`: neither; every job is expected to run `default_runtime`.
"""

from __future__ import annotations

from collections import deque

from scheduling.policy.runtime import ESTIMATE_FROM, learned_estimate

from .engine import Entry

ESTIMATES: tuple[str, ...] = ("history", "oracle", "none")


class Runtimes:
    """What the snapshot says of how long each job runs, by `mode`."""

    def __init__(self, mode: str, default_runtime: int) -> None:
        if mode not in ESTIMATES:
            raise ValueError(f"estimates must be one of {', '.join(ESTIMATES)}, got {mode!r}")
        self.mode = mode
        self.default_runtime = default_runtime
        self.runs: dict[tuple[str, int], deque[int]] = {}
        self.learned: dict[tuple[str, int], int] = {}

    def max_runtime(self, entry: Entry) -> int | None:
        """Returns the job's `max_runtime`: its true duration under `oracle`, else None."""
        return entry.job.duration if self.mode == "oracle" else None

    def estimate(self, entry: Entry) -> int | None:
        """Returns the job's learned estimate under `history`, None when none is learned."""
        return self.learned.get(self.key(entry))

    @staticmethod
    def key(entry: Entry) -> tuple[str, int]:
        """Returns what estimates are learned by: the job's team and GPUs."""
        return entry.team, entry.gpus

    def learn(self, entry: Entry, runtime: int) -> tuple[str, int] | None:
        """Notes that `entry` succeeded after running `runtime` seconds; returns
        the key (team, GPUs) whose estimate changed, None when none did."""
        if self.mode != "history":
            return None
        key = self.key(entry)
        runs = self.runs.get(key)
        if runs is None:
            runs = self.runs[key] = deque(maxlen=ESTIMATE_FROM)
        runs.append(runtime)
        learned = learned_estimate(runs, self.default_runtime)
        if learned is None or self.learned.get(key) == learned:
            return None
        self.learned[key] = learned
        return key
