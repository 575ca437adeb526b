"""What the simulated cluster's replicas write: plausible training logs, and a traceback when a job fails.

Nothing is stored: line `i` of a replica's log is a pure function of the job, the
replica, `i` and the seed, so a tail is computed without the lines before it and
every read of the same moment gives the same text.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Generator
from dataclasses import replace
from datetime import datetime, timedelta

from scheduling.cluster import simulated_replicas
from scheduling.cluster.base import (
    LOG_CHUNK_BYTES, LOG_LIMIT_BYTES, PICK, LogPosition, LogStream, ReplicaLog, failing_replica,
)
from scheduling.cluster.log_text import utc_stamp
from scheduling.models import SimJob

STEP = 10  # seconds of training between two lines
CHECKPOINT_EVERY = 30  # steps
EPOCH_STEPS = 100
HEADER = 2  # lines before the first step

EXCEPTIONS = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ValueError: Expected input batch_size (256) to match target batch_size (255).",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00017.tfrecord'",
    "RuntimeError: NCCL communicator was aborted on rank 1.",
)
TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 212, in <module>',
    "    main()",
    '  File "/app/train.py", line 198, in main',
    "    loss = train_step(model, batch, optimizer)",
    '  File "/app/train.py", line 141, in train_step',
    "    outputs = model(inputs)",
    '  File "/usr/local/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl',
    "    return forward_call(*args, **kwargs)",
)
FAILED_EXIT_CODE = 1
STOPPED_EXIT_CODE = 143  # SIGTERM: the replicas the operator stops once one has failed


def failing(job: SimJob, seed: int) -> tuple[str, str]:
    """Returns (the replica that fails, the exception it raises) for a job that fails."""
    rng = random.Random(seed * 104_729 + job.job_id)
    names = simulated_replicas.names(job) or ["worker-0"]
    return rng.choice(names), rng.choice(EXCEPTIONS)


def failure_summary(job: SimJob, seed: int) -> str:
    """The sentence the job's Failed condition carries: which replica, its exit code, reason and exception."""
    replica, exception = failing(job, seed)
    return f"Replica {replica} exited with code {FAILED_EXIT_CODE} (Error): {exception}"


def deadline_at(job) -> datetime | None:
    """When the job's current run passes its activeDeadlineSeconds (`SimJob.deadline`): its latest start plus
    the deadline, in wall time, its stalls counted. The operator counts from the start time in the job's status,
    and Kubeflow Trainer (as a Kubernetes Job) resets that timer when a suspended job resumes; here the start is
    when the gang started, so the moments a created or resumed job waits for room at once do not count. None for
    a job without a deadline or not started. `job` is a SimJob, or what a pass reads of one (`simulated._Pass`)."""
    if not job.deadline or not job.started_at:
        return None
    return job.started_at + timedelta(seconds=job.deadline)


def past_deadline(job: SimJob) -> bool:
    """Whether the job failed because it ran past its deadline (`simulated.advance` ends it at that moment)."""
    cut = deadline_at(job)
    return job.finished_at is not None and not job.succeeded and cut is not None and job.finished_at >= cut


def deadline_summary(job: SimJob) -> str:
    """The sentence the Failed condition of a job past its deadline carries, with the operator's reason."""
    return (f"DeadlineExceeded: {job.kind} {job.namespace}/{job.name} was active longer than its "
            f"activeDeadlineSeconds ({job.deadline} s, its max runtime); its replicas were stopped.")


def _culprit(job: SimJob, seed: int) -> tuple[str, str]:
    """(the replica that fails, its exception) for a job that failed of itself; ("", "") for any other, one past its
    deadline included: none of its replicas failed, the operator stopped them all."""
    if job.finished_at is None or job.succeeded or past_deadline(job):
        return "", ""
    return failing(job, seed)


def replica_logs(job: SimJob, now: datetime, seed: int, *, replica: str = "", tail: int | None,
                 lines_of: str | None = None, timed: bool = False,
                 after: dict[str, LogPosition] | None = None) -> list[ReplicaLog]:
    """Returns each replica's last `tail` lines (all, up to LOG_LIMIT_BYTES, when None) and how it ended;
    with `lines_of`, only that replica's lines (PICK: the failing one's, else the first's); with `timed`,
    each line's time; with `after`, the lines after each replica's position, as the port says.

    A job that has not started, or is suspended, has no pods and so no replicas.
    """
    if job.finished_at is None and (job.suspended or job.started_at is None):
        return []
    base, steps = _timeline(job, now)
    culprit, exception = _culprit(job, seed)
    pods = {name: f"{job.name}-{name}" for name in simulated_replicas.names(job)}
    result = []
    for index, name in enumerate(pods):
        if replica and name != replica:
            continue
        result.append(ReplicaLog(replica=name, pod=pods[name], phase=_phase(job, index),
                                 **_ending(job, name, culprit, exception)))  # fmt: skip
    if lines_of == PICK:
        chosen = failing_replica(result) or (result[0] if result else None)
        lines_of = chosen.replica if chosen else ""
    names = list(pods)
    result = [state if lines_of is None or state.replica == lines_of else replace(state, read=False)
              for state in result]  # fmt: skip
    for index, state in enumerate(result):
        if not state.read:
            continue
        log = _Log(job, state.replica, names.index(state.replica), len(names), base, steps, seed, culprit, exception)
        if after is not None:
            result[index] = replace(state, **log.after(after.get(state.replica, LogPosition()), tail))
        elif timed:
            result[index] = replace(state, **log.timed_tail(tail))
        else:
            result[index] = replace(state, lines=log.tail(tail))
    return result


def replica_stream(job: SimJob, now: datetime, seed: int, *, replica: str) -> LogStream | None:
    """The port's `log_stream`: the replica's whole log as it stands at `now`, however long, in chunks of at
    most LOG_CHUNK_BYTES, each line computed as it is passed on. None when the job has no such replica."""
    states = replica_logs(job, now, seed, replica=replica, tail=0)
    if not states or states[0].replica != replica:
        return None
    base, steps = _timeline(job, now)
    culprit, exception = _culprit(job, seed)
    names = simulated_replicas.names(job)
    log = _Log(job, replica, names.index(replica), len(names), base, steps, seed, culprit, exception)
    return LogStream(states[0], _chunks(log))


def _chunks(log: _Log) -> Generator[bytes, None, None]:
    """The log's lines as the kubelet serves them (each ended by "\\n"), gathered into chunks of at most
    LOG_CHUNK_BYTES."""
    held, size = [], 0
    for number in range(len(log)):
        line = (log.line(number) + "\n").encode()
        if held and size + len(line) > LOG_CHUNK_BYTES:
            yield b"".join(held)
            held, size = [], 0
        held.append(line)
        size += len(line)
    if held:
        yield b"".join(held)


def last_checkpoint(job: SimJob, now: datetime) -> datetime | None:
    """Returns when the job's replicas last wrote "checkpoint: saved step N" in their current run, at the
    moment the log gives: when its training reports with `gangway checkpoint`, right after saving.

    None while no pod of it runs (not started, suspended, ended: nothing left to report), and before its
    first checkpoint of this run. A resumed job's log starts over from its first step, shifted by the time
    it was suspended; the steps up to its progress were saved in an earlier run and reported then.
    """
    if job.finished_at is not None or job.suspended or job.started_at is None:
        return None
    base, steps = _timeline(job, now)
    step = steps // CHECKPOINT_EVERY * CHECKPOINT_EVERY
    if step == 0 or step * STEP <= job.progress:
        return None
    return _moment(job, base, step)


def saved_progress(job: SimJob, now: datetime) -> float:
    """Returns the seconds of training a running job keeps when it is stopped at `now`: those up to the last
    checkpoint its log shows (the one its training reported, `last_checkpoint`), or, when it saved none
    in this run, the progress it came back with (none at its first start). The training since is lost, as
    a real job's is when it is preempted: it restarts from its last checkpoint."""
    _base, steps = _timeline(job, now)
    return max(job.progress, float(steps // CHECKPOINT_EVERY * CHECKPOINT_EVERY * STEP))


def trained(job, end: datetime) -> float:
    """Returns the seconds a running (or ended) job trained in its current run by `end`: from its start, less
    the time it stalled, a replica of it waiting for a node again (its run's `stalls` that ended, and the one
    under way since `stalled_since`, which stops its count there); 0 for a job not started. `job` is a SimJob,
    or what a pass reads of one (`simulated._Pass`)."""
    if not job.started_at:
        return 0.0
    if job.stalled_since is not None:
        end = min(end, job.stalled_since)
    stalled = sum(seconds for _, seconds in job.stalls or ())
    return max(0.0, (end - job.started_at).total_seconds() - stalled)


def _timeline(job: SimJob, now: datetime) -> tuple[datetime, int]:
    """Returns (when the log's step 0 is, the steps it has written by `now` or its end): a resumed job's
    log counts its progress as if it had run without a break, up to its current start; a stall writes no step
    (`trained`), and the steps after it are that much later (`_moment`)."""
    end = job.finished_at or now
    ran = job.progress + trained(job, end)
    base = (job.started_at or end) - timedelta(seconds=job.progress)
    return base, int(ran // STEP)


def _moment(job: SimJob, base: datetime, step: int) -> datetime:
    """When the log writes step `step`, its step 0 at `base`: a step every STEP seconds of training, each after a
    stall of its run (`SimJob.stalls`) later by that stall."""
    stalled = sum(seconds for at, seconds in job.stalls or () if at < step * STEP)
    return base + timedelta(seconds=step * STEP + stalled)


def _phase(job: SimJob, index: int) -> str:
    """The phase of replica `index`'s pod: Pending while it waits for a node again after a drain."""
    if job.finished_at is None:
        return "Pending" if index < len(job.nodes) and not job.nodes[index] else "Running"
    return "Succeeded" if job.succeeded else "Failed"


def _ending(job: SimJob, name: str, culprit: str, exception: str) -> dict:
    if job.finished_at is None:
        return {}
    if job.succeeded:
        return {"exit_code": 0, "reason": "Completed", "finished_at": job.finished_at}
    if not culprit:  # past its deadline: the operator stopped every replica
        return {"exit_code": STOPPED_EXIT_CODE, "reason": "DeadlineExceeded",
                "message": f"Stopped: its job passed its activeDeadlineSeconds ({job.deadline} s).",
                "finished_at": job.finished_at}  # fmt: skip
    if name == culprit:
        return {"exit_code": FAILED_EXIT_CODE, "reason": "Error", "message": exception, "finished_at": job.finished_at}
    return {"exit_code": STOPPED_EXIT_CODE, "reason": "Error", "message": f"Stopped after replica {culprit} failed.",
            "finished_at": job.finished_at + timedelta(seconds=1)}  # fmt: skip


class _Log:
    """One replica's log: a header, a line per training step (a checkpoint every so often), an ending."""

    def __init__(self, job, name, index, count, base, steps, seed, culprit, exception):
        self.job, self.name, self.index, self.count = job, name, index, count
        self.base, self.steps, self.seed = base, steps, seed
        self.ending: tuple[str, ...] = ()
        if job.finished_at is not None:
            at = self._at(steps + 1)
            if job.succeeded:
                self.ending = (f"{at} INFO train: finished {steps} steps; exiting with code 0",)
            elif not culprit:
                self.ending = (f"{at} WARNING gangway: stopping: the job passed its max runtime ({job.deadline} s)",)
            elif name == culprit:
                self.ending = (f"{at} ERROR train: step {steps + 1} failed", *TRACEBACK, exception)
            else:
                self.ending = (f"{at} WARNING gangway: stopping: replica {culprit} failed",)

    def __len__(self) -> int:
        return HEADER + self.steps + len(self.ending)

    def tail(self, count: int | None) -> tuple[str, ...]:
        total = len(self)
        start = 0 if count is None else max(0, total - count)
        lines, size = [], 0
        for number in range(start, total):
            line = self.line(number)
            size += len(line) + 1
            if count is None and size > LOG_LIMIT_BYTES:
                break  # as the API server's limitBytes: the start of the log
            lines.append(line)
        return tuple(lines)

    def timed_tail(self, count: int | None) -> dict:
        """The ReplicaLog fields of `tail(count)` with each line's time and the position after the last."""
        lines = self.tail(count)
        first = 0 if count is None else len(self) - len(lines)  # a whole log cut by its bytes is its start
        return {"lines": lines, "times": tuple(self.time(number) for number in range(first, first + len(lines))),
                "position": self._position(first + len(lines) - 1) if lines else LogPosition()}

    def after(self, position: LogPosition, count: int | None) -> dict:
        """The ReplicaLog fields of the lines after `position`: the last `count` of them (all with None), and
        how many came before those (`skipped`). Exact: every line of the log is known; a position this log
        does not hold (the lines of another run) reads on from the first line after its time."""
        total = len(self)
        if position.time:
            start = bisect.bisect_left(range(total), position.time, key=self.time)
            end = bisect.bisect_right(range(total), position.time, key=self.time)
            first = min(start + position.count, end)
        else:
            start = end = first = 0
        skipped = 0 if count is None else max(0, total - first - count)
        numbers = range(first + skipped, total)
        return {"lines": tuple(self.line(number) for number in numbers),
                "times": tuple(self.time(number) for number in numbers),
                "position": self._position(total - 1) if total > first else position, "skipped": skipped,
                "skipped_exact": start + position.count <= end}

    def time(self, number: int) -> str:
        """When line `number` was written, as the kubelet stamps it: the header's at step 0, the ending's
        after the last step, so several lines share a time."""
        step = 0 if number < HEADER else min(number - HEADER + 1, self.steps + 1)
        return utc_stamp(_moment(self.job, self.base, step))

    def _position(self, number: int) -> LogPosition:
        """The position just after line `number`."""
        at = self.time(number)
        return LogPosition(at, number - bisect.bisect_left(range(len(self)), at, key=self.time) + 1)

    def line(self, number: int) -> str:
        if number == 0:
            return (f"{self._at(0)} INFO gangway: job {self.job.job_id} replica {self.name} ({self.index + 1} of "
                    f"{self.count}) started")  # fmt: skip
        if number == 1:
            return f"{self._at(0)} INFO data: 1281167 training samples, batch size 256 per replica"
        step = number - HEADER + 1
        if step <= self.steps:
            if step % CHECKPOINT_EVERY == 0:
                return f"{self._at(step)} INFO checkpoint: saved step {step} to /checkpoint/step-{step:06d}.pt"
            rng = random.Random(f"{self.seed}:{self.job.job_id}:{self.name}:{step}")
            loss = 2.5 * math.exp(-step / 400) + 0.2 + rng.uniform(-0.05, 0.05)
            return (f"{self._at(step)} INFO train: epoch {(step - 1) // EPOCH_STEPS + 1} step {step} "
                    f"loss={loss:.4f} lr={0.1 * 0.97 ** (step // EPOCH_STEPS):.5f} "
                    f"{int(rng.gauss(820, 25))} samples/s")  # fmt: skip
        return self.ending[step - self.steps - 1]

    def _at(self, step: int) -> str:
        return _moment(self.job, self.base, step).strftime("%Y-%m-%d %H:%M:%S")
