from django.core.management.base import BaseCommand, CommandError

from scheduling.cluster import ClusterUnavailable, get_cluster
from scheduling.cluster.base import SyncIncomplete
from scheduling.cluster_words import unreachable
from scheduling.tenants import tenants_from_database


class Command(BaseCommand):
    help = "Make namespaces, quotas, limit ranges, priority classes and Volcano queues match Gangway's teams."

    def handle(self, *args, **options):
        try:
            changes = get_cluster().sync_tenants(tenants_from_database())
        except ClusterUnavailable as error:  # no configuration, or a server that does not answer: nothing was changed
            raise CommandError(unreachable(error)) from None
        except SyncIncomplete as error:
            self._changed(error.changes)
            refused = "\n".join(f"- {failure}" for failure in error.failures)
            raise CommandError(f"{len(error.failures)} object(s) are not in line; every other one is:\n{refused}")
        self._changed(changes)

    def _changed(self, changes: list[str]) -> None:
        for change in changes:
            self.stdout.write(f"- {change}")
        self.stdout.write(f"{len(changes)} change(s).")
