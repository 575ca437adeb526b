"""`gangway logs`: print a job's replica logs, and with --follow keep printing new lines until the job ends (--all,
one replica's whole log, is `whole_log.py`)."""

from __future__ import annotations

import sys
import time

from gangway_cli import exits
from gangway_cli.client import ApiError, Client
from gangway_cli.follow import FAILURE, SUCCESS


def new_lines(seen: list[str], current: list[str]) -> list[str]:
    """The lines of `current` (a log's latest tail) that come after those already printed (`seen`).

    The longest end of `seen` that starts `current` is what both hold; when none does, more
    was written between two reads than a tail holds, and all of `current` is new.
    """
    for overlap in range(min(len(seen), len(current)), 0, -1):
        if seen[-overlap:] == current[:overlap]:
            return current[overlap:]
    return current


def failure_line(failure: dict) -> str:
    """ "replica worker-1 failed with exit code 137 (OOMKilled): it used more memory than its limit" """
    text = f"replica {failure['replica']} failed"
    if failure.get("exit_code") is not None:
        text += f" with exit code {failure['exit_code']}"
    if failure.get("reason"):
        text += f" ({failure['reason']})"
    if failure.get("explanation"):
        text += f": {failure['explanation']}"
    return text + (f" - {failure['message']}" if failure.get("message") else "")


# While following, a read after the first asks for up to the API's most lines of each replica (LOG_TAIL_MAX):
# an answer holds only the lines written since the last one, so a large bound costs nothing until a job writes
# that much between two reads, and only then are lines skipped.
FOLLOW_TAIL = 5000


def whole_log_command(job_id: int, replica: str) -> str:
    """The command that writes a replica's whole log: "gangway logs 42 --replica worker-1 --all"."""
    return f"gangway logs {job_id} --replica {replica} --all"


def skipped_line(replica: dict, where: str) -> str:
    """The notice printed where a read left lines out: "... 1,234 lines skipped: ...; the full log: `gangway logs
    42 --replica worker-1 --all`" (`where`)."""
    count, exact = replica.get("skipped") or 0, replica.get("skipped_exact", True)
    if count:
        what = (f"{'' if exact else 'at least '}{count:,} line{'s' if count != 1 else ''} skipped: "
                "the job wrote faster than the read returns")  # fmt: skip
    else:
        what = ("lines may be missing here: the cluster no longer has the log they were in (a container "
                "restarted, a pod was replaced or its log rotated)")  # fmt: skip
    return f"... {what}; the full log: {where}"


class LogPrinter:
    """Prints a job's log lines, each prefixed by its replica when the job has several.

    Following, each read after the first asks for the lines after the last answer's `cursor`, so every line
    is printed once, however often its text repeats, and a read that left lines out says so where they
    were. A portal that answers without a cursor (older than it) gets today's reading: the latest tail,
    of which the lines after the end of those printed are new (`new_lines`); a log whose lines repeat, or
    that writes more than --tail lines between two reads, may then lose lines without a word.
    """

    def __init__(self, client: Client, job_id: int, *, replica: str | None, tail: int, out=None, err=None,
                 sleep=time.sleep):  # fmt: skip
        self.client, self.job_id, self.replica, self.tail = client, job_id, replica, tail
        self.out, self.err, self.sleep = out or sys.stdout, err or sys.stderr, sleep
        self.seen: dict[str, list[str]] = {}
        self.cursor: str | None = None
        self.warned = False
        self.shown = 0  # answers shown so far

    def read(self) -> dict:
        if self.cursor is None:
            return self.client.get(f"api/v1/jobs/{self.job_id}/logs/", replica=self.replica, tail=self.tail)
        return self.client.get(f"api/v1/jobs/{self.job_id}/logs/", replica=self.replica, tail=FOLLOW_TAIL,
                               cursor=self.cursor)  # fmt: skip

    def show(self, answer: dict, *, follow: bool = False) -> None:
        several = len(answer["replicas"]) > 1
        self.shown += 1
        by_position = "cursor" in answer
        for replica in answer["replicas"]:
            name = replica["replica"]
            if by_position:
                lines = replica["lines"]
                if self.cursor is not None and (replica.get("skipped") or not replica.get("skipped_exact", True)):
                    notice = skipped_line(replica, f"{whole_log_command(self.job_id, name)} (in a browser: "
                                          f"{self.client.url(f'jobs/{self.job_id}/logs/{name}.log')})")  # fmt: skip
                    print(f"[{name}] {notice}" if several else notice, file=self.out)
            else:
                seen = self.seen.setdefault(name, [])
                lines = new_lines(seen, replica["lines"])
                self.seen[name] = (seen + replica["lines"])[-2 * self.tail :]
            for line in lines:
                print(f"[{name}] {line}" if several else line, file=self.out)
        self.out.flush()
        if by_position and follow:
            self.cursor = answer["cursor"]
        elif follow and not self.warned and self.shown > 1:  # said once, at the first read told apart by its text
            self.warned = True
            print("gangway: this portal cannot read on from a position: lines that repeat the ones before them, "
                  f"or more than {self.tail} written between two reads (--tail), may be left out without notice.",
                  file=self.err, flush=True)  # fmt: skip

    def run(self, *, follow: bool, interval: float) -> int:
        """Prints the logs once (or until the job ends, with `follow`); returns the exit code.

        0, except when following a job that ends failed, cancelled or rejected (1). A job
        that failed gets a last line on standard error naming its failing replica. Once, an
        error raises ApiError; following, a server out of reach or answering 5xx (the cluster
        unreadable) is waited for, with a line on standard error when it goes and comes back,
        and only other errors (401, 403, 404...) raise.
        """
        answer = self.follow_read(interval) if follow else self.read()
        self.show(answer, follow=follow)
        while follow and answer["state"] not in SUCCESS | FAILURE:
            self.sleep(interval)
            answer = self.follow_read(interval)
            self.show(answer, follow=follow)
        if not answer["replicas"]:
            print(f"Job {self.job_id} has no logs yet ({answer['state']}).", file=self.err)
        if answer.get("failure"):
            print(f"gangway: {failure_line(answer['failure'])}", file=self.err)
        return exits.JOB_FAILED if follow and answer["state"] in FAILURE else exits.OK

    def follow_read(self, interval: float) -> dict:
        """The next read, however long the server takes to come back (the client has already retried
        each read a few times); raises ApiError for an error other than the server being unavailable."""
        gone = False
        while True:
            try:
                answer = self.read()
            except ApiError as error:
                if exits.for_status(error.status) != exits.UNAVAILABLE:
                    raise
                if not gone:
                    print(f"gangway: server unavailable, still following job {self.job_id}: {error}", file=self.err,
                          flush=True)  # fmt: skip
                gone = True
                self.sleep(interval)
                continue
            if gone:
                print(f"gangway: reached the server again; following job {self.job_id}.", file=self.err, flush=True)
            return answer
