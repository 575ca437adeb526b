"""`gangway logs`: print a job's replica logs, and with --follow keep printing new lines until the job ends."""

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


class LogPrinter:
    """Prints a job's log lines, each prefixed by its replica when the job has several."""

    def __init__(self, client: Client, job_id: int, *, replica: str | None, tail: int, out=None, err=None,
                 sleep=time.sleep):  # fmt: skip
        self.client, self.job_id, self.replica, self.tail = client, job_id, replica, tail
        self.out, self.err, self.sleep = out or sys.stdout, err or sys.stderr, sleep
        self.seen: dict[str, list[str]] = {}

    def read(self) -> dict:
        return self.client.get(f"api/v1/jobs/{self.job_id}/logs/", replica=self.replica, tail=self.tail)

    def show(self, answer: dict) -> None:
        several = len(answer["replicas"]) > 1
        for replica in answer["replicas"]:
            seen = self.seen.setdefault(replica["replica"], [])
            for line in new_lines(seen, replica["lines"]):
                print(f"[{replica['replica']}] {line}" if several else line, file=self.out)
            self.seen[replica["replica"]] = (seen + replica["lines"])[-2 * self.tail :]
        self.out.flush()

    def run(self, *, follow: bool, interval: float) -> int:
        """Prints the logs once (or until the job ends, with `follow`); returns the exit code.

        0, except when following a job that ends failed, cancelled or rejected (1). A job
        that failed gets a last line on standard error naming its failing replica. Once, an
        error raises ApiError; following, a server out of reach or answering 5xx (the cluster
        unreadable) is waited for, with a line on standard error when it goes and comes back,
        and only other errors (401, 403, 404...) raise.
        """
        answer = self.follow_read(interval) if follow else self.read()
        self.show(answer)
        while follow and answer["state"] not in SUCCESS | FAILURE:
            self.sleep(interval)
            answer = self.follow_read(interval)
            self.show(answer)
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
