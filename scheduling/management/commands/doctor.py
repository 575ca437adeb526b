from django.core.management.base import BaseCommand

from scheduling.cluster import ClusterUnavailable, get_cluster
from scheduling.tenants import tenants_from_database


class Command(BaseCommand):
    help = "Check the configured cluster for what Gangway needs; exits 1 when something is wrong."

    def handle(self, *args, **options):
        try:
            findings = get_cluster().doctor(tenants_from_database())
        except ClusterUnavailable as error:
            self.stdout.write(f"The cluster could not be reached: {error}. Check KUBECONFIG or the in-cluster "
                              "service account.")  # fmt: skip
            raise SystemExit(1)
        for finding in findings:
            self.stdout.write(f"- {finding.problem} Fix: {finding.fix}")
        if findings:
            self.stdout.write(f"{len(findings)} problem(s) found.")
            raise SystemExit(1)
        self.stdout.write("All checks passed.")
