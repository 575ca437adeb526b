"""The `gangway` command line: its commands, their options, help texts and exit codes (from `exits`)."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import textwrap

from gangway_cli import checkpoint, exits
from gangway_cli.connection import allow_http_from_env

ABOUT = ("Submit training jobs to a Gangway portal and wait for them, show their status and logs, cancel them, "
         "list them, show the queue; inside a job, report a checkpoint.")
CONFIGURATION = """\
Configuration: --url or GANGWAY_URL (https://; plain http only to this machine unless --allow-http or
GANGWAY_ALLOW_HTTP=1); the token from GANGWAY_TOKEN, or the file --token-file or GANGWAY_TOKEN_FILE
names (--token works too, but shows in the process list). A portal whose certificate your organisation's
own CA signed: set SSL_CERT_FILE to that CA's PEM file. Errors are one line on standard error;
--json prints what the API returns, one JSON document on standard output. `gangway COMMAND --help`
says more about each command.
"""
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# The states a job can be in (the API's `state` filter takes these), and how many jobs `gangway jobs` lists.
STATES = ("queued", "admitted", "running", "preempting", "cancelling", "succeeded", "failed", "cancelled", "rejected")
JOBS_DEFAULT, JOBS_MAX = 50, 500
JSON_HELP = "Print the job as the API returns it (GET /api/v1/jobs/{id}/), as one JSON document."
LINES_MAX = 10**12  # the most lines a download reads on from (the portal's `from`)


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


def parse_idempotency_key(text: str) -> str:
    """`text` when an HTTP header can carry it as it is (printable ASCII, not only spaces); ArgumentTypeError
    otherwise, rather than a key the server would read as none (blank) or that cannot be sent at all."""
    if not text.strip() or not text.isascii() or not text.isprintable():
        raise argparse.ArgumentTypeError(f"not an idempotency key: {text[:200]!r}; use printable ASCII, "
                                         "e.g. the CI run's id: pipeline-4711-train.")  # fmt: skip
    return text


def parse_limit(text: str) -> int:
    """A number of jobs, 1 to JOBS_MAX (the most one page of the API holds); ArgumentTypeError otherwise."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(JOBS_MAX)) and 1 <= int(text) <= JOBS_MAX):
        raise argparse.ArgumentTypeError(f"not a number of jobs from 1 to {JOBS_MAX}: {text[:40]!r}")
    return int(text)


def parse_states(text: str) -> str:
    """'running' or 'queued,running' as the API's `state` filter; ArgumentTypeError for a name not a state."""
    names = [name.strip().lower() for name in text.split(",")]
    unknown = [name for name in names if name not in STATES]
    if unknown:
        raise argparse.ArgumentTypeError(f"not a job state: {', '.join(map(repr, unknown))} (one of "
                                         f"{', '.join(STATES)}, or several separated by commas)")  # fmt: skip
    return ",".join(dict.fromkeys(names))


def parse_line_count(text: str) -> int:
    """A whole number of lines, 0 to LINES_MAX; ArgumentTypeError otherwise."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(LINES_MAX)) and int(text) <= LINES_MAX):
        raise argparse.ArgumentTypeError(f"not a number of lines: {text[:40]!r} (e.g. 123456, as a download cut "
                                         "short says)")  # fmt: skip
    return int(text)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that takes options only as they are spelled in full, and names the options an unknown
    one may have meant: an abbreviation would change meaning the day an option that starts alike is added
    (`--al` read as `--all` until `--allow-http` came)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        # A command's own options are known here, not to the parser above it, which would say "unrecognized
        # arguments" alone.
        unknown = next((arg for arg in extras if re.match(r"--?[A-Za-z]", arg)), None)
        if unknown is not None:
            self.error(self._unknown(unknown))
        return namespace, extras

    def _unknown(self, arg: str) -> str:
        name = arg.partition("=")[0]
        options = sorted(option for option in self._option_string_actions if option.startswith("--"))
        started = [option for option in options if option.startswith(name)] if name.startswith("--") else []
        alike = started or difflib.get_close_matches(name, options, n=3, cutoff=0.7)
        if not alike:
            return f"unknown option {name}; `{self.prog} --help` lists the options."
        meant = " or ".join(alike) if len(alike) <= 2 else ", ".join(alike[:-1]) + " or " + alike[-1]
        spelled = " options are spelled in full;" if started else ""
        return f"unknown option {name}:{spelled} did you mean {meant}?"


def build_parser() -> argparse.ArgumentParser:
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--url", default=os.environ.get("GANGWAY_URL"), help="Portal URL (default: $GANGWAY_URL).")
    where.add_argument("--allow-http", action="store_true", default=allow_http_from_env(),
                       help="Send the token over plain http to a host other than this machine "
                       "(default: off, or $GANGWAY_ALLOW_HTTP=1).")  # fmt: skip
    auth = argparse.ArgumentParser(add_help=False, parents=[where])
    auth.add_argument("--token-file", metavar="PATH",
                      help="Read the API token from this file (default: $GANGWAY_TOKEN, else the file "
                      "$GANGWAY_TOKEN_FILE names).")  # fmt: skip
    auth.add_argument("--token", help="The API token itself; prefer $GANGWAY_TOKEN or --token-file, since a flag "
                      "shows in the process list.")  # fmt: skip
    parser = Parser(prog="gangway", description=textwrap.fill(ABOUT, 100),
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog=CONFIGURATION + "\n" + exits.epilog(*exits.MEANINGS))  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, description: str, codes: tuple[int, ...], parents=(auth,)):
        # Any command can be stopped: Ctrl-C and SIGTERM end each with its code (`main`).
        codes = (*codes, exits.INTERRUPTED, exits.TERMINATED)
        return commands.add_parser(name, parents=list(parents), help=summary,
                                   description=textwrap.fill(f"{summary} {description}", 100),
                                   epilog=exits.epilog(*codes), formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip

    E = exits
    submit = command(
        "submit", "Submit a job from a YAML (or JSON) file.",
        "The file holds Gangway's job spec or a job manifest (TFJob, PyTorchJob...). Prints the job's page "
        "URL. Each submission carries an idempotency key (generated unless given) that its own retries reuse, "
        "so a timeout or a 502/503 never makes two jobs; give --idempotency-key to make re-running the whole "
        "command safe too.",
        (E.OK, E.JOB_FAILED, E.USAGE, E.TIMEOUT, E.AUTH, E.NOT_FOUND, E.REFUSED, E.UNAVAILABLE),
    )  # fmt: skip
    submit.add_argument("file", help="Gangway job spec or a job manifest (TFJob, PyTorchJob...); - for standard input.")
    submit.add_argument("--team", help="Team slug (else the spec's team, or the team token's).")
    submit.add_argument("--wait", action="store_true", help="Follow the job until it ends; exit 0 only on success.")
    submit.add_argument("--timeout", type=parse_duration, help="With --wait: give up after this long (exit 3), e.g. 2h.")
    submit.add_argument("--interval", type=parse_duration, default=5.0, help="With --wait: seconds between polls.")
    submit.add_argument("--idempotency-key", type=parse_idempotency_key,
                        help="Resubmitting with the same key returns the same job (printable ASCII, e.g. the CI "
                        "run id).")  # fmt: skip
    submit.add_argument("--gpu-type", action="append", type=parse_gpu_types, metavar="TYPE[,TYPE...]",
                        help="GPU types the job accepts, in order of preference: repeat it or separate with commas "
                        "(--gpu-type h100 --gpu-type a100). Else the file's gpu_type, or the team's types.")  # fmt: skip
    submit.add_argument("--json", action="store_true", help="Print the job as the API returns it, as one JSON "
                        "document (with --wait: as it ended; the progress lines go to standard error).")  # fmt: skip

    status = command("status", "Show a job.", "Its team, tier and GPUs, its state, its place in the queue and why "
                     "it waits, and its page.", (E.OK, E.USAGE, E.AUTH, E.NOT_FOUND, E.UNAVAILABLE))  # fmt: skip
    status.add_argument("id", type=int, help="The job's id.")
    status.add_argument("--json", action="store_true", help=JSON_HELP)

    logs = command("logs", "Print a job's replica logs (the last lines of each).",
                   "With --follow, keeps printing new lines, through server outages, until the job ends: each line "
                   "once, however often its text repeats; should the job write more between two reads than one "
                   "read returns (5000 lines of each replica), a line says how many were skipped and the command "
                   "that writes the whole log. Against a portal too old to read on from a position, new lines are "
                   "told from those printed by their text, and lines that repeat the ones before them, or more than "
                   "--tail written between two reads, may be left out without notice (a warning says so). With "
                   "--all, writes one replica's whole log, however long, as it comes, each line once: `gangway logs "
                   "42 --replica worker-0 --all > worker-0.log`; where the portal stops a download (it bounds the "
                   "time of one) or the connection drops, it reads on from the line after the last written, saying "
                   "so on standard error, and should it still not finish (exit 7) it says how many lines are "
                   "written and the command that writes the rest (--from).",
                   (E.OK, E.JOB_FAILED, E.USAGE, E.AUTH, E.NOT_FOUND, E.REFUSED, E.UNAVAILABLE))  # fmt: skip
    logs.add_argument("id", type=int, help="The job's id.")
    whole = logs.add_mutually_exclusive_group()
    whole.add_argument("-f", "--follow", action="store_true",
                       help="Keep printing new lines until the job ends; exit 1 if it fails.")  # fmt: skip
    whole.add_argument("--all", action="store_true",
                       help="Write the replica's whole log to standard output (a job of several replicas: name "
                       "one with --replica; exit 6 otherwise, naming them).")  # fmt: skip
    logs.add_argument("--replica", help="Only this replica, e.g. worker-0.")
    logs.add_argument("--tail", type=int, help="Lines of each replica to start from (default 100; not with --all).")
    logs.add_argument("--from", dest="start", type=parse_line_count, metavar="LINES",
                      help="With --all: leave out the log's first LINES lines, those already written (as a "
                      "download cut short says), e.g. `--from 123456 >> worker-0.log`.")  # fmt: skip
    logs.add_argument("--interval", type=parse_duration, default=3.0, help="With --follow: seconds between reads.")

    cancel = command("cancel", "Cancel a job.", "A queued job is cancelled at once, an admitted or running one "
                     "stops at the next reconcile; cancelling it again changes nothing. A job that already ended "
                     "is refused (exit 6).", (E.OK, E.USAGE, E.AUTH, E.NOT_FOUND, E.REFUSED, E.UNAVAILABLE))  # fmt: skip
    cancel.add_argument("id", type=int, help="The job's id.")
    cancel.add_argument("--json", action="store_true", help=JSON_HELP)

    jobs = command("jobs", "List the jobs you can see, newest first.",
                   f"The newest {JOBS_DEFAULT} (--limit up to {JOBS_MAX}), of every team you see or one, in some "
                   "states or all, submitted by anyone or one person; a line says how many more there are.",
                   (E.OK, E.USAGE, E.AUTH, E.REFUSED, E.UNAVAILABLE))  # fmt: skip
    jobs.add_argument("--team", help="Only this team's jobs (several: maps,vision).")
    jobs.add_argument("--state", type=parse_states, metavar="STATE[,STATE...]",
                      help=f"Only jobs in these states: {', '.join(STATES)}.")  # fmt: skip
    jobs.add_argument("--owner", metavar="USERNAME", help="Only the jobs this person submitted.")
    jobs.add_argument("--limit", type=parse_limit, default=JOBS_DEFAULT,
                      help=f"At most this many jobs, newest first (default {JOBS_DEFAULT}, at most {JOBS_MAX}).")
    jobs.add_argument("--json", action="store_true", help="Print the jobs, newest first, as one JSON array of jobs "
                      "as the API returns them.")  # fmt: skip

    queue = command("queue", "Show the waiting jobs you can see, in order.",
                    "The first 200, or with --team or --json every one.",
                    (E.OK, E.USAGE, E.AUTH, E.REFUSED, E.UNAVAILABLE))  # fmt: skip
    queue.add_argument("--team", help="Only this team's jobs (several: maps,vision).")
    queue.add_argument("--json", action="store_true", help="Print the waiting jobs, in order, as one JSON array of "
                       "jobs as the API returns them.")  # fmt: skip

    report = command(
        "checkpoint", "From inside a job: report that it just saved a checkpoint.", checkpoint.DESCRIPTION,
        (E.OK, E.USAGE, E.AUTH, E.NOT_FOUND, E.REFUSED, E.UNAVAILABLE), parents=(where,),
    )  # fmt: skip
    checkpoint.add_arguments(report, _env_int)
    return parser


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isascii() and value.isdigit() else None
