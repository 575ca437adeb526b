from django.core.management.base import BaseCommand

from scheduling.cluster import get_cluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile


class Command(BaseCommand):
    help = "Run one reconcile and one admission cycle in the foreground and print what they did."

    def add_arguments(self, parser):
        parser.add_argument("--no-reconcile", action="store_true", help="Only the admission cycle.")

    def handle(self, *args, no_reconcile: bool, **options):
        cluster = get_cluster()
        if not no_reconcile:
            self.stdout.write(reconcile(cluster=cluster).summary)
        result = admission_cycle(cluster=cluster)
        self.stdout.write(result.summary)
        if result.error:
            raise SystemExit(1)
