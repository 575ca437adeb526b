"""Cordon or uncordon a node of the simulated cluster, as `kubectl cordon` and `kubectl uncordon` do.

A cordoned node keeps its running jobs and takes no new one; the next admission cycle reads it as
not schedulable: nothing is placed or reserved there, and a job only it could hold waits for it
instead of being rejected (R10). A change asks for that cycle now, as a quota change does, so a job
waiting for the node starts soon after it is uncordoned rather than at beat's next cycle.

With --drain it also evicts the replicas running there, as `kubectl drain` does: each one's pod is made
again and waits for room on another node, its job running short of it meanwhile, its training stalled until
every replica runs again (R13 evicts a job still short after ADMISSION_TIMEOUT).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal import triggers
from scheduling.cluster import simulated
from scheduling.models import SimNode


class Command(BaseCommand):
    help = ("Cordon a node of the simulated cluster (its jobs keep running, no new job starts there), "
            "drain it with --drain (its replicas are evicted and wait for room elsewhere), or uncordon it with "
            "--uncordon.")

    def add_arguments(self, parser):
        parser.add_argument("node", help="Name of the simulated node, e.g. node-04.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--uncordon", action="store_true", help="Let the node take new jobs again.")
        which.add_argument("--drain", action="store_true",
                           help="Also evict the replicas running there: each waits for room on another node.")

    def handle(self, *args, node: str, uncordon: bool, drain: bool, **options):
        if settings.CLUSTER_BACKEND != "simulated":
            raise CommandError(f"cordon acts on the simulated cluster only; CLUSTER_BACKEND is "
                               f"{settings.CLUSTER_BACKEND}. On a real cluster, run kubectl cordon, drain or "
                               "uncordon.")
        try:
            if drain:
                self._drain(node)
                return
            changed = simulated.cordon(node, schedulable=uncordon)
        except SimNode.DoesNotExist:
            names = ", ".join(SimNode.objects.order_by("name").values_list("name", flat=True)) or "none (run seed_demo)"
            raise CommandError(f"No node {node!r} in the simulated cluster; its nodes are {names}.") from None
        verb = "uncordoned" if uncordon else "cordoned"
        if not changed:
            self.stdout.write(f"Node {node} was already {verb}; nothing changed.")
            return
        # After `cordon` committed, so the cycle reads the node as it is now; with the broker down, beat's does.
        triggers.trigger(triggers.ADMISSION_CYCLE)
        if uncordon:
            self.stdout.write(f"Uncordoned node {node}: an admission cycle is asked for now, and may place jobs "
                              "there.")
        else:
            self.stdout.write(f"Cordoned node {node}: its jobs keep running; an admission cycle is asked for now, "
                              "and places nothing there: jobs only it could hold wait for it.")

    def _drain(self, node: str) -> None:
        evicted = simulated.drain(node)
        triggers.trigger(triggers.ADMISSION_CYCLE)
        self.stdout.write(f"Drained node {node}: cordoned, and {evicted} replica{'s' if evicted != 1 else ''} "
                          "evicted, each waiting for room on another node; an admission cycle is asked for now.")
