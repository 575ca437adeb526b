"""The `gangway` command: submit a job (and wait for it), show its status and logs, cancel it, show the queue;
inside a job, report a checkpoint.

Exit codes: 0 success, 1 the job failed, was cancelled or rejected (or the
server refused for another reason), 2 a usage or validation error, 3 timeout.
`checkpoint` exits 1 whenever the portal refused the report or could not be
reached, and 2 only when the command line names no job or job token.
Configuration: --url / --token, or GANGWAY_URL / GANGWAY_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid

from gangway_cli.client import ApiError, Client
from gangway_cli.follow import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Follower, describe
from gangway_cli.logs import LogPrinter

UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'2h', '90m', '1h30m', '45s' or plain seconds, in seconds; ArgumentTypeError otherwise."""
    parts = re.findall(r"(\d+)([smhd]?)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip() or not sum(int(n) for n, _ in parts):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 2h, 90m, 1h30m, 3600)")
    return float(sum(int(number) * UNITS[unit] for number, unit in parts))


def parse_gpu_types(text: str) -> list[str]:
    """'a100' or 'h100,a100' as a list of names; ArgumentTypeError for an empty name. Which names the
    cluster has is the server's check."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"not a list of GPU type names: {text!r} (e.g. h100,a100)")
    return names


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("GANGWAY_URL"), help="Portal URL (default: $GANGWAY_URL).")
    common.add_argument("--token", default=os.environ.get("GANGWAY_TOKEN"),
                        help="API token (default: $GANGWAY_TOKEN).")  # fmt: skip
    parser = argparse.ArgumentParser(prog="gangway", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    submit = commands.add_parser("submit", parents=[common], help="Submit a job from a YAML (or JSON) file.")
    submit.add_argument("file", help="Gangway job spec or a job manifest (TFJob, PyTorchJob...); - for standard input.")
    submit.add_argument("--team", help="Team slug (else the spec's team, or the team token's).")
    submit.add_argument("--wait", action="store_true", help="Follow the job until it ends; exit 0 only on success.")
    submit.add_argument("--timeout", type=parse_duration, help="With --wait: give up after this long (exit 3), e.g. 2h.")
    submit.add_argument("--interval", type=parse_duration, default=5.0, help="With --wait: seconds between polls.")
    submit.add_argument("--idempotency-key", help="Resubmitting with the same key returns the same job (e.g. the CI run id).")
    submit.add_argument("--gpu-type", action="append", type=parse_gpu_types, metavar="TYPE[,TYPE...]",
                        help="GPU types the job accepts, in order of preference: repeat it or separate with commas "
                        "(--gpu-type h100 --gpu-type a100). Else the file's gpu_type, or the team's types.")  # fmt: skip

    status = commands.add_parser("status", parents=[common], help="Show a job.")
    status.add_argument("id", type=int)
    status.add_argument("--json", action="store_true", help="Print the job as JSON.")

    logs = commands.add_parser("logs", parents=[common], help="Print a job's replica logs (the last lines of each).")
    logs.add_argument("id", type=int)
    logs.add_argument("-f", "--follow", action="store_true",
                      help="Keep printing new lines until the job ends; exit 1 if it fails.")  # fmt: skip
    logs.add_argument("--replica", help="Only this replica, e.g. worker-0.")
    logs.add_argument("--tail", type=int, default=100, help="Lines of each replica to start from (default 100).")
    logs.add_argument("--interval", type=parse_duration, default=3.0, help="With --follow: seconds between reads.")

    cancel = commands.add_parser("cancel", parents=[common], help="Cancel a job.")
    cancel.add_argument("id", type=int)

    queue = commands.add_parser("queue", parents=[common], help="Show the waiting jobs you can see, in order.")
    queue.add_argument("--team", help="Only this team's jobs.")

    checkpoint = commands.add_parser(
        "checkpoint", parents=[common],
        help="From inside a job: report that it just saved a checkpoint (least unsaved work is preempted first).",
        description="Run by a training script right after it saves a checkpoint. Reads GANGWAY_URL, "
        "GANGWAY_JOB_ID and GANGWAY_JOB_TOKEN, which Gangway puts in every pod of the job. Exits 0 when "
        "recorded, 1 when the portal refused or could not be reached (a script may ignore it).",
    )  # fmt: skip
    checkpoint.add_argument("--job", type=int, default=_env_int("GANGWAY_JOB_ID"),
                            help="The job's id (default: $GANGWAY_JOB_ID).")  # fmt: skip
    checkpoint.add_argument("--job-token", default=os.environ.get("GANGWAY_JOB_TOKEN"),
                            help="The job's own token (default: $GANGWAY_JOB_TOKEN).")  # fmt: skip
    return parser


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def cmd_submit(client: Client, args) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as error:
        return fail(f"Cannot read {args.file}: {error.strerror}.", EXIT_USAGE)
    # The server parses the YAML (safely, with its limits) and validates it, so
    # the CLI and the portal can never disagree about what a valid job is.
    key = args.idempotency_key or f"gangway-cli-{uuid.uuid4()}"  # our own retries stay safe either way
    query = {"team": args.team} if args.team else {}
    if args.gpu_type:  # the server puts them in the spec (a manifest has no field for them) and checks them
        query["gpu_type"] = ",".join(name for names in args.gpu_type for name in names)
    try:
        answer = client.request("POST", "api/v1/jobs/", data=text.encode(), content_type="application/yaml",
                                query=query or None,
                                headers={"Idempotency-Key": key}, retry=True)  # fmt: skip
    except ApiError as error:
        if error.status == 400 and isinstance(error.body, dict) and "code" in error.body:
            return fail(f"Rejected: {error}", EXIT_FAILED)  # can never fit (R10)
        if error.status in (400, 401, 403, 409):
            return fail(str(error), EXIT_USAGE)
        return fail(str(error), EXIT_FAILED)
    job = answer.body
    for field in job.get("unsupported", []):
        print(f"warning: not carried over: {field}", file=sys.stderr)
    if answer.status == 200:
        print(f"Job {job['id']} was already submitted with idempotency key {key!r}.", file=sys.stderr)
    print(job.get("web_url") or job["url"], flush=True)
    if not args.wait:
        return EXIT_OK
    return Follower(client, job, interval=args.interval, timeout=args.timeout).run()


def cmd_status(client: Client, args) -> int:
    job = client.get(f"api/v1/jobs/{args.id}/")
    if args.json:
        print(json.dumps(job, indent=2))
        return EXIT_OK
    types = job.get("assigned_gpu_type") or "/".join(job.get("gpu_type") or [])
    print(f"{job['name']} (#{job['id']}) team {job['team']}, tier {job['tier']}, {job['gpu_total']} GPUs"
          + (f" ({types})" if types else ""))
    print(describe(job))
    print(job.get("web_url") or job["url"])
    return EXIT_OK


def cmd_logs(client: Client, args) -> int:
    if not 1 <= args.tail <= 5000:
        return fail("--tail must be from 1 to 5000 lines.", EXIT_USAGE)
    printer = LogPrinter(client, args.id, replica=args.replica, tail=args.tail)
    return printer.run(follow=args.follow, interval=args.interval)


def cmd_cancel(client: Client, args) -> int:
    job = client.request("POST", f"api/v1/jobs/{args.id}/cancel/").body
    print(f"Job {job['name']} (#{job['id']}): {job['state']}.")
    return EXIT_OK


def cmd_queue(client: Client, args) -> int:
    page = client.get("api/v1/queue/", page_size=200)
    jobs = [job for job in page["results"] if not args.team or job["team"] == args.team]
    if not jobs:
        print("No waiting jobs.")
        return EXIT_OK
    print(f"{'POS':>4} {'TEAM POS':>8} {'ID':>6}  {'TEAM':<12} {'NAME':<24} {'GPUS':>4}  {'TIER':<11} REASON")
    for job in jobs:
        print(f"{job.get('position') or '-':>4} {job.get('team_position') or '-':>8} {job['id']:>6}  "
              f"{job['team']:<12} {job['name']:<24} {job['gpu_total']:>4}  {job['tier']:<11} {job.get('reason', '')}")  # fmt: skip
    if page.get("next"):
        print(f"... and {page['count'] - len(page['results'])} more.")
    return EXIT_OK


def cmd_checkpoint(client: Client, args) -> int:
    try:
        answer = client.request("POST", f"api/v1/jobs/{args.job}/checkpoint/", retry=True).body
    except ApiError as error:
        # Whatever the portal answered (a token for another job, tampered or expired, a job that
        # is not running), the command line was right: exit 1, which a training script may ignore.
        return fail(str(error), EXIT_FAILED)
    print(f"Checkpoint of job {answer['job']} recorded at {answer['checkpointed_at']}.")
    return EXIT_OK


COMMANDS = {"submit": cmd_submit, "status": cmd_status, "logs": cmd_logs, "cancel": cmd_cancel, "queue": cmd_queue,
            "checkpoint": cmd_checkpoint}


def fail(message: str, code: int) -> int:
    print(f"gangway: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.url:
        return fail("no portal URL: pass --url or set GANGWAY_URL.", EXIT_USAGE)
    if args.command == "checkpoint":
        if args.job is None or not args.job_token:
            return fail("no job: run it inside a Gangway job's pod (GANGWAY_JOB_ID and GANGWAY_JOB_TOKEN), "
                        "or pass --job and --job-token.", EXIT_USAGE)  # fmt: skip
        args.token = args.job_token
    if not args.token:
        return fail("no API token: pass --token or set GANGWAY_TOKEN (a lead creates one on the team page).", EXIT_USAGE)
    client = Client(args.url, args.token)
    try:
        return COMMANDS[args.command](client, args)
    except ApiError as error:
        return fail(str(error), EXIT_USAGE if error.status in (400, 401, 403) else EXIT_FAILED)
    except KeyboardInterrupt:
        return fail("interrupted; the job keeps going on the server.", 130)


if __name__ == "__main__":
    sys.exit(main())
