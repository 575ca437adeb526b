"""`manage.py replay`: replay a GPU-cluster trace in virtual time under the
real admission policy and the policies shared clusters use today."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from scheduling.sim.run import add_arguments, config_from, run
from scheduling.sim.trace import TraceError


class Command(BaseCommand):
    help = ("Replay a trace (or --synthetic N jobs) under each --policy at each --load and "
            "print the comparison table; --out writes summary.csv, teams.csv and plots.")
    # No database, no cluster: the replay is pure Python on a simulated clock.
    requires_system_checks = []

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **options):
        try:
            config = config_from(options)
            result = run(config, err=self.stderr)
        except TraceError as error:
            self.stderr.write(str(error))
            sys.exit(2)
        self.stdout.write(result.table)
        jobs = sum(row["jobs"] for row in result.rows)
        seconds = sum(s for _, _, s, _ in result.outcomes)
        self.stdout.write(f"Replayed {len(result.rows)} policy runs, {jobs:,} jobs finished, "
                          f"{result.bad} bad rows skipped, in {seconds:.0f} s.")
