"""Create jobs in the simulated cluster as kubectl and Katib would, outside Gangway, to watch them join the queue.

Each is created suspended with the label gangway.io/queue, as the admission policy requires in
a team namespace; the next reconcile adopts them, and the Katib trials form one sweep.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from scheduling.cluster import outside_examples, simulated_outside
from scheduling.models import SimOutsideJob
from tenants.models import Team


class Command(BaseCommand):
    help = ("Create a kubectl-style TFJob and a Katib-style experiment of N trials in a team's namespace of the "
            "simulated cluster (suspended, labelled gangway.io/queue), or delete one as its owner would.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--team", default="research", help="Team (namespace) to create them in (default research).")
        parser.add_argument("--experiment", default="tune-lr", help="Katib experiment name (default tune-lr).")
        parser.add_argument("--trials", type=int, default=6, help="Trials of the experiment, 0-100 (default 6).")
        parser.add_argument("--trial-gpus", type=int, default=2, help="GPUs of each trial, 1-64 (default 2).")
        parser.add_argument("--kubectl", default="bert-pretrain",
                            help="Name of the kubectl-style TFJob; '' for none.")  # fmt: skip
        parser.add_argument("--user", default="alice", help="Who ran kubectl (the creator annotation).")
        parser.add_argument("--delete", metavar="NAME", help="Delete this outside job instead, as `kubectl delete` would.")

    def handle(self, *args, team: str, experiment: str, trials: int, trial_gpus: int, kubectl: str, user: str,
               delete: str | None, **options):  # fmt: skip
        if settings.CLUSTER_BACKEND != "simulated":
            raise CommandError(f"simulate_outside acts on the simulated cluster only; CLUSTER_BACKEND is "
                               f"{settings.CLUSTER_BACKEND}. On a real cluster, create the job with kubectl, "
                               "suspended and labelled gangway.io/queue: <team>.")  # fmt: skip
        if not Team.objects.filter(slug=team).exists():
            teams = ", ".join(Team.objects.values_list("slug", flat=True)) or "none (run seed_demo)"
            raise CommandError(f"No team {team!r}; the teams are {teams}.")
        if delete:
            if not simulated_outside.remove(team, delete):
                raise CommandError(f"No outside job {team}/{delete} in the simulated cluster.")
            self.stdout.write(f"Deleted {team}/{delete}; the next reconcile cancels its Gangway job.")
            return
        if not 0 <= trials <= 100 or not 1 <= trial_gpus <= 64:
            raise CommandError("--trials must be 0..100 and --trial-gpus 1..64.")
        with transaction.atomic():
            made = self.create_kubectl_job(team, kubectl, user) if kubectl else 0
            made_trials = self.create_trials(team, experiment, trials, trial_gpus)
        self.stdout.write(f"Created {made} kubectl job and {made_trials} trials of experiment {experiment} in "
                          f"namespace {team}; the next reconcile adopts them.")  # fmt: skip

    def create_kubectl_job(self, team: str, name: str, user: str) -> int:
        if SimOutsideJob.objects.filter(namespace=team, name=name).exists():
            return 0
        simulated_outside.add(outside_examples.kubectl_job(team=team, name=name, user=user), now=timezone.now())
        return 1

    def create_trials(self, team: str, experiment: str, trials: int, gpu: int) -> int:
        made = 0
        for manifest in outside_examples.katib_trials(team=team, experiment=experiment, trials=trials, gpu=gpu):
            if not SimOutsideJob.objects.filter(namespace=team, name=manifest["metadata"]["name"]).exists():
                simulated_outside.add(manifest, now=timezone.now())
                made += 1
        return made
