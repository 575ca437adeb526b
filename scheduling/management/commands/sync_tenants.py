from django.core.management.base import BaseCommand

from scheduling.cluster import get_cluster
from scheduling.tenants import tenants_from_database


class Command(BaseCommand):
    help = "Make namespaces, quotas, limit ranges, priority classes and Volcano queues match Gangway's teams."

    def handle(self, *args, **options):
        changes = get_cluster().sync_tenants(tenants_from_database())
        for change in changes:
            self.stdout.write(f"- {change}")
        self.stdout.write(f"{len(changes)} change(s).")
