"""The `gangway` command: submit a job (and wait for it), show its status and logs, cancel it, list jobs, show the
queue; inside a job, report a checkpoint (`checkpoint.py`). Options and help texts are in `arguments.py`, exit
codes in `exits.py`; every command returns its exit code.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

from gangway_cli import checkpoint, exits
from gangway_cli.arguments import JOBS_MAX, build_parser
from gangway_cli.client import ApiError, Client
from gangway_cli.connection import Problem, checked_url, token_from
from gangway_cli.durations import duration
from gangway_cli.follow import Follower, describe, short_reason
from gangway_cli.logs import LogPrinter
from gangway_cli.signals import STOPS, code_for, sigterm_raises, word_for
from gangway_cli.whole_log import write_whole_log

QUEUE_PAGE = 500  # the API's largest page
# The widest a table's TEAM and NAME columns grow (a slug may have 63 characters, a job's name 50): each is as
# wide as its longest value shown, and a longer value ends in an ellipsis, so every row's columns line up.
TEAM_WIDTH, NAME_WIDTH = 20, 40


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2), flush=True)


def _read_file(name: str) -> str:
    """The file's text (standard input for -); raises Problem naming what went wrong."""
    try:
        if name == "-":
            return sys.stdin.read()
        with open(name, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise Problem(f"Cannot read {name}: {error.strerror}.") from None
    except UnicodeDecodeError:
        raise Problem(f"Cannot read {name}: it is not UTF-8 text.") from None


def media_type(name: str, text: str) -> str:
    """application/json for a file named .json or whose text is JSON, else application/yaml.

    The server's YAML parser reads YAML 1.1, which is no superset of JSON: a JSON file indented with tabs
    (`jq --tab`, Go's MarshalIndent) would be refused and a number such as 36e2 read as a string.
    """
    if name.lower().endswith(".json"):
        return "application/json"
    try:
        json.loads(text, parse_constant=_not_json)
    except ValueError:
        return "application/yaml"
    return "application/json"


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")  # NaN and the infinities: the server's JSON parser refuses them


def cmd_submit(client: Client, args) -> int:
    try:
        text = _read_file(args.file)
    except Problem as problem:
        return fail(str(problem), exits.USAGE)
    # The server parses the JSON or YAML (safely, with its limits) and validates it, so
    # the CLI and the portal can never disagree about what a valid job is.
    key = args.idempotency_key or f"gangway-cli-{uuid.uuid4()}"  # our own retries stay safe either way
    again = (f"the job may have been created: run the same command with --idempotency-key {key} to get it "
             "back rather than a second one.")  # fmt: skip
    query = {"team": args.team} if args.team else {}
    if args.gpu_type:  # the server puts them in the spec (a manifest has no field for them) and checks them
        query["gpu_type"] = ",".join(name for names in args.gpu_type for name in names)
    # --wait --timeout bounds the whole command: the submission's retries as well as the wait that follows.
    started = time.monotonic()
    deadline = started + args.timeout if args.wait and args.timeout else None
    try:
        answer = client.request("POST", "api/v1/jobs/", data=text.encode(), content_type=media_type(args.file, text),
                                query=query or None, headers={"Idempotency-Key": key}, retry=True,
                                deadline=deadline)  # fmt: skip
    except STOPS as stop:
        return fail(f"{word_for(stop)} before the server answered; {again}", code_for(stop))
    except ApiError as error:
        if error.status == 400 and isinstance(error.body, dict) and "code" in error.body:
            return fail(f"Rejected: {error}", exits.JOB_FAILED)  # can never fit (R10)
        code = exits.for_status(error.status)
        return fail(f"{error} {again[0].upper()}{again[1:]}" if code == exits.UNAVAILABLE else str(error), code)
    job = answer.body
    for field in job.get("unsupported", []):
        print(f"warning: not carried over: {field}", file=sys.stderr)
    if answer.status == 200:
        print(f"Job {job['id']} was already submitted with idempotency key {key!r}.", file=sys.stderr)
    if args.json and not args.wait:
        _print_json(job)
        return exits.OK
    print(job.get("web_url") or job["url"], file=sys.stderr if args.json else sys.stdout, flush=True)
    if not args.wait:
        return exits.OK
    follower = Follower(client, job, interval=args.interval, timeout=args.timeout, since=started,
                        out=sys.stderr if args.json else sys.stdout)  # fmt: skip
    try:
        code = follower.run()
    except STOPS as stop:
        return fail(f"{word_for(stop)}; job {job['id']} keeps going on the server: `gangway cancel {job['id']}` "
                    "stops it.", code_for(stop))  # fmt: skip
    if args.json:
        _print_json(follower.job)
    return code


def cmd_status(client: Client, args) -> int:
    job = client.get(f"api/v1/jobs/{args.id}/")
    if args.json:
        _print_json(job)
        return exits.OK
    types = job.get("assigned_gpu_type") or "/".join(job.get("gpu_type") or [])
    gpus = f"{job['gpu_total']} GPU{'' if job['gpu_total'] == 1 else 's'}"
    print(f"{job['name']} (#{job['id']}) team {job['team']}, tier {job['tier']}, {gpus}" + (f" ({types})" if types else ""))
    print(describe(job))
    print(job.get("web_url") or job["url"])
    return exits.OK


def cmd_logs(client: Client, args) -> int:
    if args.all:
        if args.tail is not None:
            return fail("--all writes the whole log; leave out --tail.", exits.USAGE)
        return write_whole_log(client, args.id, replica=args.replica, start=args.start or 0)
    if args.start is not None:
        return fail("--from goes with --all, the whole log, to leave out the lines already written.", exits.USAGE)
    tail = 100 if args.tail is None else args.tail
    if not 1 <= tail <= 5000:
        return fail("--tail must be from 1 to 5000 lines.", exits.USAGE)
    printer = LogPrinter(client, args.id, replica=args.replica, tail=tail)
    return printer.run(follow=args.follow, interval=args.interval)


def cmd_cancel(client: Client, args) -> int:
    # Safe to repeat: the server answers a second cancel with the job as the first left it.
    job = client.request("POST", f"api/v1/jobs/{args.id}/cancel/", retry=True).body
    if args.json:
        _print_json(job)
        return exits.OK
    print(f"Job {job['name']} (#{job['id']}): {job['state']}.")
    return exits.OK


def _width(heading: str, values: list[str], most: int) -> int:
    """A column's width: its longest value's or its heading's, at most `most`."""
    return min(most, max([len(heading), *map(len, values)]))


def _cut(text: str, width: int) -> str:
    """`text` padded to `width`, or cut to it with an ellipsis as its last character."""
    return f"{text:<{width}}" if len(text) <= width else text[: width - 1] + "…"


def cmd_jobs(client: Client, args) -> int:
    page = client.get("api/v1/jobs/", team=args.team, state=args.state, owner=args.owner, ordering="-submitted_at",
                      page_size=args.limit)  # fmt: skip
    jobs, count = page["results"][: args.limit], page["count"]
    if args.json:
        _print_json(jobs)
        return exits.OK
    if not jobs:
        print("No jobs" + (" match." if args.team or args.state or args.owner else " yet."))
        return exits.OK
    now = datetime.now(timezone.utc)
    team = _width("TEAM", [job["team"] for job in jobs], TEAM_WIDTH)
    name = _width("NAME", [job["name"] for job in jobs], NAME_WIDTH)
    print(f"{'ID':>6}  {'TEAM':<{team}} {'NAME':<{name}} {'STATE':<10} {'GPUS':>4}  {'TIER':<11} {'OWNER':<12} SUBMITTED")
    for job in jobs:
        submitted = datetime.fromisoformat(job["submitted_at"].replace("Z", "+00:00"))
        state = job["state"] + ("*" if short_reason(job) else "")
        print(f"{job['id']:>6}  {_cut(job['team'], team)} {_cut(job['name'], name)} {state:<10} {job['gpu_total']:>4}  "
              f"{job['tier']:<11} {job.get('owner') or '-':<12} {duration(max(0.0, (now - submitted).total_seconds()))} ago")  # fmt: skip
    short = [str(job["id"]) for job in jobs if short_reason(job)]
    if short:
        print(f"* running short of replicas, to be evicted unless they start: `gangway status {short[0]}` says why "
              "and by when.")  # fmt: skip
    if count > len(jobs):
        more = count - len(jobs)
        print(f"... and {more} older {'job' if more == 1 else 'jobs'}: --limit (up to {JOBS_MAX}), --team, --state "
              "or --owner shows others.")  # fmt: skip
    return exits.OK


def queued_jobs(client: Client, *, every: bool, team: str | None = None) -> tuple[list[dict], int]:
    """The waiting jobs in queue order (the first page, or with `every` all of them) and how many wait in all;
    with `team`, the server sends that team's only (a portal older than `?team=` sends all: the caller
    keeps the team's).

    Each page after the first is read as the `next` link of the one before says: after its last job, wherever
    that job stands now (a portal older than that gives page numbers), so jobs leaving the queue ahead while
    the pages are read make none skip a page. Each job comes once: one queued ahead pushes the last of a page
    onto the next, where it would come again.
    """
    jobs: dict[int, dict] = {}
    where: dict[str, object] = {"page": 1}
    while True:
        page = client.get("api/v1/queue/", page_size=QUEUE_PAGE if every else 200, team=team, **where)
        for waiting in page["results"]:
            jobs.setdefault(waiting["id"], waiting)
        # Bounded by the count the first page gave, should pages keep saying there is a next one.
        if not every or not page.get("next") or not page["results"] or len(jobs) >= page["count"]:
            return list(jobs.values()), page["count"]
        cursor = parse_qs(urlsplit(page["next"]).query)
        where = ({"after": cursor["after"][0], "at": cursor.get("at", ["0"])[0]} if "after" in cursor
                 else {"page": int(where.get("page", 1)) + 1})  # fmt: skip


def cmd_queue(client: Client, args) -> int:
    jobs, count = queued_jobs(client, every=bool(args.team or args.json), team=args.team)
    teams = {slug.strip() for slug in args.team.split(",")} if args.team else set()  # --team "maps, vision" too
    jobs = [job for job in jobs if not teams or job["team"] in teams]
    if args.json:
        _print_json(jobs)
        return exits.OK
    if not jobs:
        print("No waiting jobs.")
        return exits.OK
    team = _width("TEAM", [job["team"] for job in jobs], TEAM_WIDTH)
    name = _width("NAME", [job["name"] for job in jobs], NAME_WIDTH)
    print(f"{'POS':>4} {'TEAM POS':>8} {'ID':>6}  {'TEAM':<{team}} {'NAME':<{name}} {'GPUS':>4}  {'TIER':<11} REASON")
    for job in jobs:
        print(f"{job.get('position') or '-':>4} {job.get('team_position') or '-':>8} {job['id']:>6}  "
              f"{_cut(job['team'], team)} {_cut(job['name'], name)} {job['gpu_total']:>4}  {job['tier']:<11} "
              f"{job.get('reason', '')}")  # fmt: skip
    if not args.team and count > len(jobs):
        print(f"... and {count - len(jobs)} more.")
    return exits.OK


COMMANDS = {"submit": cmd_submit, "status": cmd_status, "logs": cmd_logs, "cancel": cmd_cancel, "jobs": cmd_jobs,
            "queue": cmd_queue}  # fmt: skip


def fail(message: str, code: int) -> int:
    print(f"gangway: {message}", file=sys.stderr, flush=True)
    return code


def _warn(sentence: str) -> None:
    print(f"gangway: {sentence}", file=sys.stderr, flush=True)


def run(argv: list[str] | None = None) -> int:
    """The exit code of one command line; ApiError, KeyboardInterrupt and Terminated may escape."""
    args = build_parser().parse_args(argv)
    if args.command == "checkpoint":
        return checkpoint.run(args)
    try:
        url = checked_url(args.url, allow_http=args.allow_http)
        token = token_from(args.token, args.token_file, env="GANGWAY_TOKEN", env_file="GANGWAY_TOKEN_FILE")
    except Problem as problem:
        return fail(str(problem), exits.USAGE)
    if not token:
        return fail("no API token: set GANGWAY_TOKEN or pass --token-file (a lead creates one on the team page).",
                    exits.USAGE)  # fmt: skip
    try:
        return COMMANDS[args.command](Client(url, token, warn=_warn), args)
    except ApiError as error:
        return fail(str(error), exits.for_status(error.status))


def main(argv: list[str] | None = None) -> int:
    try:
        with sigterm_raises():
            return run(argv)
    except STOPS as stop:
        return fail(f"{word_for(stop)}.", code_for(stop))
    except BrokenPipeError:
        # Whoever read standard output stopped (`gangway logs 42 | head`): nothing to report. Standard
        # output goes to /dev/null so that Python's last flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # as a process killed by SIGPIPE, which is what shells expect of a pipe's writer


if __name__ == "__main__":
    sys.exit(main())
