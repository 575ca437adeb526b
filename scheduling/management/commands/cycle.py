from django.core.management.base import BaseCommand, CommandError

from scheduling.cluster import ClusterUnavailable, get_cluster
from scheduling.cluster.base import ClusterError
from scheduling.cluster_words import refused, unreachable
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile


class Command(BaseCommand):
    help = "Run one reconcile and one admission cycle in the foreground and print what they did; exits 1 when either failed."

    def add_arguments(self, parser):
        parser.add_argument("--no-reconcile", action="store_true", help="Only the admission cycle.")

    def handle(self, *args, no_reconcile: bool, **options):
        try:
            cluster = get_cluster()  # reads KUBECONFIG or the service account: may find neither
        except ClusterUnavailable as error:
            raise CommandError(unreachable(error)) from None
        failed = False
        if not no_reconcile:
            try:
                self.stdout.write(reconcile(cluster=cluster).summary)
            except ClusterError as error:  # a read refused (403): an unreachable cluster is in the summary
                self.stdout.write(refused("the reconcile", error))
                failed = True
        result = admission_cycle(cluster=cluster)
        self.stdout.write(result.summary)
        if result.error or failed:
            raise SystemExit(1)
