"""Following a job until it ends: a line per change, a progress line on a terminal, the exit code at the end."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from gangway_cli import exits
from gangway_cli.client import ApiError, Client
from gangway_cli.durations import duration

SUCCESS = {"succeeded"}
FAILURE = {"failed", "cancelled", "rejected"}
# The API's reason_code of a running job some of whose replicas wait to start (a drained or lost node): the portal's
# jobs.codes.Because.SHORT_OF_REPLICAS, spelled out here as the CLI never imports the portal (a test compares them).
SHORT_OF_REPLICAS = "short_of_replicas"


def short_reason(job: dict) -> str:
    """Why a running job is short of replicas and by when it is evicted, as the API says it; "" for any other job."""
    if job["state"] == "running" and job.get("reason_code") == SHORT_OF_REPLICAS:
        return job.get("reason") or "Short of replicas."
    return ""


def _when(value: str | None, now: datetime) -> str:
    if not value:
        return ""
    at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    left = (at - now).total_seconds()
    return "starts any moment" if left <= 60 else f"starts in about {duration(left)}"


def describe(job: dict, now: datetime | None = None) -> str:
    """One line for a job's current standing, e.g. 'queued - position 3 (1 in team) - starts in about 40 min - ...'."""
    now = now or datetime.now(timezone.utc)
    parts = [job["state"]]
    if job.get("position"):
        parts.append(f"position {job['position']} ({job.get('team_position') or '?'} in team)")
    if job["state"] == "queued" and job.get("eta"):
        parts.append(_when(job["eta"], now))
    if job["state"] in ("admitted", "running", "preempting") and job.get("placement"):
        parts.append("on " + ", ".join(sorted(set(job["placement"]))))
    if job.get("reason") and job["state"] not in ("running", "succeeded"):
        parts.append(job["reason"])
    parts.append(short_reason(job))  # a running job's other reasons are history; this one may end in its eviction
    return " - ".join(part for part in parts if part)


def _signature(job: dict) -> tuple:
    return job["state"], job.get("position"), job.get("team_position"), job.get("eta"), job.get("reason")


class Follower:
    """Polls a job every `interval` seconds until it ends or `timeout` (seconds, or None) passes, counted
    from `since` (a time.monotonic() value: when the command began) or else from when `run` starts.

    The timeout bounds the whole wait: no sleep and no poll, with its retries, goes past it. A server
    out of reach or answering 5xx is waited for (a line says so, and another when it is back); any
    other error (401, 403, 404...) ends the wait with its exit code. `job` is the job as last read.
    """

    def __init__(self, client: Client, job: dict, *, interval: float, timeout: float | None,
                 since: float | None = None, out=None, err=None, sleep=time.sleep):  # fmt: skip
        self.client, self.job, self.interval, self.timeout, self.since = client, job, interval, timeout, since
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.tty = self.out.isatty()
        # The client's clock too: the deadline is handed to each poll.
        self.clock, self.sleep = time.monotonic, sleep
        self.progress_shown = False

    def run(self) -> int:
        started = self.clock()
        deadline = (started if self.since is None else self.since) + self.timeout if self.timeout else None
        last, unreachable = None, False
        job = self.job
        while True:
            if _signature(job) != last:
                self._line(describe(job))
                last = _signature(job)
            if job["state"] in SUCCESS | FAILURE:
                return self._end(job, self.clock() - started)
            if deadline is not None and self.clock() >= deadline:
                self._line(f"Timed out after {duration(self.timeout)}; job {job['id']} is still {job['state']}. "
                           f"It keeps going: `gangway cancel {job['id']}` stops it.")  # fmt: skip
                return exits.TIMEOUT
            self._progress(job, self.clock() - started)
            wait = self.interval if deadline is None else max(0.0, min(self.interval, deadline - self.clock()))
            self.sleep(wait)
            if deadline is not None and self.clock() >= deadline:
                continue  # no time left for a poll: the top of the loop says so
            try:
                job = self.job = self.client.get(f"api/v1/jobs/{job['id']}/", deadline=deadline)
                if unreachable:
                    self._line("Reached the server again.")
                unreachable = False
            except ApiError as error:
                if exits.for_status(error.status) != exits.UNAVAILABLE:
                    self._clear_progress()
                    print(f"gangway: cannot follow job {job['id']} any more: {error}", file=self.err, flush=True)
                    return exits.for_status(error.status)
                if not unreachable:
                    self._line(f"Server unavailable, still trying: {error}")
                unreachable = True

    def _end(self, job: dict, elapsed: float) -> int:
        if job["state"] in SUCCESS:
            self._line(f"Job {job['name']} (#{job['id']}) succeeded; followed for {duration(elapsed)}.")
            return exits.OK
        self._line(f"Job {job['name']} (#{job['id']}) {job['state']}.")
        return exits.JOB_FAILED

    def _line(self, text: str) -> None:
        self._clear_progress()
        stamp = datetime.now().strftime("%H:%M:%S")
        self.out.write(f"{stamp} {text}\n")
        self.out.flush()

    def _clear_progress(self) -> None:
        if self.progress_shown:
            self.out.write("\r\033[K")
            self.progress_shown = False

    def _progress(self, job: dict, elapsed: float) -> None:
        """On a terminal only: one line rewritten in place, so CI logs stay free of it."""
        if not self.tty:
            return
        where = f", position {job['position']}" if job.get("position") else ""
        short = short_reason(job).split(": ", 1)[0]  # its lead, "Only 1 of 2 replicas running"; the line above says all
        where += f", {short[:1].lower()}{short[1:]}" if short else ""
        self.out.write(f"\r\033[K  {job['state']}{where}, {duration(elapsed)} so far")
        self.out.flush()
        self.progress_shown = True
