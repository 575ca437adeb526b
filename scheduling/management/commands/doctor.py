from django.core.management.base import BaseCommand

from core.quantities import memory_text
from scheduling.cluster import ClusterUnavailable, get_cluster
from scheduling.cluster.base import ClaimInfo, ClusterError
from scheduling.cluster_words import refused, unreachable
from scheduling.policy import native
from scheduling.tenants import tenants_from_database


class Command(BaseCommand):
    help = "Check the configured cluster for what Gangway needs and list each team's claims; exits 1 when something is wrong."

    def handle(self, *args, **options):
        tenants = tenants_from_database()
        try:
            cluster = get_cluster()  # reads KUBECONFIG or the service account: may find neither
            findings = cluster.doctor(tenants)
            claims = {team.slug: cluster.claims(team.slug) for team in tenants.teams}
        except ClusterUnavailable as error:
            self.stdout.write(unreachable(error))
            raise SystemExit(1)
        except ClusterError as error:  # e.g. 403: Gangway's account may not read what doctor checks
            self.stdout.write(refused("a check", error))
            raise SystemExit(1)
        for slug, found in claims.items():
            if found:
                self.stdout.write(f"Claims of team {slug}: {'; '.join(describe(claim) for claim in found)}.")
            else:
                self.stdout.write(f"Team {slug} has no PersistentVolumeClaims in namespace {slug}; its jobs can mount none.")
        # Which policy code this process plans with: compiled, or interpreted and why (the same
        # plans). Not the cluster's ValidatingAdmissionPolicy, which the findings speak of.
        self.stdout.write(f"Gangway's planning code: {native.REASON}.")
        problems = [finding for finding in findings if finding.blocking]
        for finding in problems:
            self.stdout.write(f"- {finding.problem} Fix: {finding.fix}")
        for finding in findings:
            if not finding.blocking:
                self.stdout.write(f"- Note: {finding.problem} Fix: {finding.fix}")
        if problems:
            self.stdout.write(f"{len(problems)} problem(s) found.")
            raise SystemExit(1)
        self.stdout.write("All checks passed." if not findings else
                          f"All checks passed, with {len(findings)} note(s).")  # fmt: skip


def describe(claim: ClaimInfo) -> str:
    """ "datasets (1 TiB, ReadWriteMany, Bound)"."""
    details = [memory_text(claim.capacity) if claim.capacity else "no capacity yet", *claim.access_modes, claim.phase or "unknown phase"]
    return f"{claim.name} ({', '.join(details)})"
