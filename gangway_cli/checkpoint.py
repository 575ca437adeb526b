"""`gangway checkpoint`, run by a training script right after it saves: tell the portal, and never
stop the training because the portal could not be told.

A training script runs it with `set -e` or `check=True` as often as without, so by default every
way of not recording the checkpoint (the portal down or slow, the token refused or expired, a pod
started without GANGWAY_URL because the portal has no PUBLIC_URL) is a warning on standard error
and exit 0; so is the command being stopped (Ctrl-C, or the SIGTERM a pod gets when it is stopped,
which a script that saves on SIGTERM may pass on). `--strict` gives the usual exit codes instead.
The whole command takes at most about 12 seconds: one retry, 5 seconds a request.
"""

from __future__ import annotations

import sys

from gangway_cli import exits
from gangway_cli.client import ApiError, Client
from gangway_cli.connection import Problem, checked_url, token_from
from gangway_cli.signals import STOPS, code_for, word_for

TIMEOUT = 5.0
RETRIES = 1

DESCRIPTION = (
    "Run by a training script right after it saves a checkpoint: the job with the least unsaved work is "
    "preempted first. Reads GANGWAY_URL, GANGWAY_JOB_ID and GANGWAY_JOB_TOKEN, which Gangway puts in every "
    "pod of the job when the portal has a PUBLIC_URL. It never fails the training: when the report cannot "
    "be made (the portal down or slow, the token refused, no job in the environment) it prints a warning "
    "and exits 0, within about 12 s. With --strict it exits with the codes below instead."
)


def add_arguments(parser, env_int) -> None:
    parser.add_argument("--job", type=int, default=env_int("GANGWAY_JOB_ID"),
                        help="The job's id (default: $GANGWAY_JOB_ID).")  # fmt: skip
    parser.add_argument("--job-token", help="The job's own token (default: $GANGWAY_JOB_TOKEN, or the file "
                        "$GANGWAY_JOB_TOKEN_FILE names; both keep it out of the process list).")  # fmt: skip
    parser.add_argument("--strict", action="store_true",
                        help="Exit non-zero when the checkpoint is not recorded (default: warn and exit 0).")  # fmt: skip


def run(args) -> int:
    """Exit 0 when recorded, or (without --strict) when not, with a warning; the code of the problem with --strict."""
    try:
        return _report(args)
    except STOPS as stop:
        return _not_recorded(f"{word_for(stop)} while reporting.", code_for(stop), strict=args.strict)


def _report(args) -> int:
    try:
        url = checked_url(args.url, allow_http=args.allow_http)
        token = token_from(args.job_token, None, env="GANGWAY_JOB_TOKEN", env_file="GANGWAY_JOB_TOKEN_FILE")
        if args.job is None or not token:
            raise Problem("no job: run it inside a Gangway job's pod (GANGWAY_JOB_ID and GANGWAY_JOB_TOKEN), "
                          "or pass --job and --job-token.")  # fmt: skip
    except Problem as problem:
        return _not_recorded(str(problem), exits.USAGE, strict=args.strict)
    client = Client(url, token, timeout=TIMEOUT, retries=RETRIES, max_wait=TIMEOUT)
    try:
        # Safe to repeat: a second report only records a slightly later time.
        answer = client.request("POST", f"api/v1/jobs/{args.job}/checkpoint/", retry=True).body
    except ApiError as error:
        return _not_recorded(str(error), exits.for_status(error.status), strict=args.strict)
    recorded = answer if isinstance(answer, dict) else {}
    print(f"Checkpoint of job {recorded.get('job', args.job)} recorded at {recorded.get('checkpointed_at', 'now')}.")
    return exits.OK


def _not_recorded(why: str, code: int, *, strict: bool) -> int:
    if strict:
        print(f"gangway: {why}", file=sys.stderr)
        return code
    print(f"gangway: warning: checkpoint not recorded, training goes on: {why}", file=sys.stderr)
    return exits.OK
