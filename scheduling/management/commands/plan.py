"""`manage.py plan`: print the plan for a JSON snapshot, with no database and
no cluster: the same policy the admission loop runs."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from scheduling.policy import plan, plan_to_dict, snapshot_from_dict


class Command(BaseCommand):
    help = (
        "Print the admission plan for a JSON snapshot (nodes, tiers, teams, running and pending jobs). "
        "The plan JSON goes to stdout; --explain prints a summary table to stderr. "
        "A malformed snapshot exits 2 with one line naming the field."
    )
    # Needs no database, no cluster and no URLs: skip the system checks so the
    # command answers even where the rest of the project is misconfigured.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--input", required=True,
                            help="snapshot JSON file, or - to read it from stdin")
        parser.add_argument("--explain", action="store_true",
                            help="also print a summary table for people, to stderr")
        parser.add_argument("--no-eta", action="store_true",
                            help="skip the estimated starts (faster on large snapshots)")

    def handle(self, *args, **options):
        try:
            text = self._read(options["input"])
            snapshot = snapshot_from_dict(json.loads(text))
        except (OSError, ValueError) as error:
            # SnapshotError and JSONDecodeError are ValueErrors; one line, exit 2.
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            if isinstance(error, json.JSONDecodeError):
                message = f"input is not JSON: {message}"
            elif isinstance(error, OSError):
                message = f"--input: cannot read {options['input']}: {error.strerror}"
            self.stderr.write(message)
            sys.exit(2)
        result = plan(snapshot, with_eta=not options["no_eta"])
        self.stdout.write(json.dumps(plan_to_dict(result), indent=2, sort_keys=False))
        if options["explain"]:
            self.stderr.write(explain(result))

    @staticmethod
    def _read(source: str) -> str:
        if source == "-":
            return sys.stdin.read()
        with open(source, encoding="utf-8") as handle:
            return handle.read()


def explain(result) -> str:
    """Returns the plan as a table a person reads, ending with a one-line summary."""
    rows = [("job", "decision", "where / why")]
    for a in result.admit:
        where = ", ".join(f"{node} x{n}" for node, n in a.placement)
        if a.victims:
            where += f"; preempts {', '.join(a.victims)}"
        rows.append((a.id, "admit", where))
    for w in result.wait:
        eta = "start unknown" if w.eta is None else f"start at {w.eta}"
        rows.append((w.id, f"wait #{w.position}", f"{w.reason} ({eta})"))
    for r in result.reject:
        rows.append((r.id, "reject", r.reason))
    for r in result.reservations:
        where = ", ".join(f"{node} x{n}" for node, n in r.placement)
        rows.append((r.id, "reserve", f"{where} from {r.start}"))
    width = [max(len(row[k]) for row in rows) for k in range(2)]
    lines = [f"{job:<{width[0]}}  {what:<{width[1]}}  {why}" for job, what, why in rows]
    preempted = sum(len(a.victims) for a in result.admit)
    lines.append(f"Admitted {len(result.admit)}, preempted {preempted}, "
                 f"waiting {len(result.wait)}, rejected {len(result.reject)}.")
    return "\n".join(lines)
