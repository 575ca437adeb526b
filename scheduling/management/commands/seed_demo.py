"""Seed a believable demo world: a simulated cluster, teams, tiers, users and jobs.

Idempotent: every row is found by its natural key first, so running it twice
changes nothing.
"""

from __future__ import annotations

import os
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from jobs import kinds
from jobs.models import Job, JobEvent
from jobs.services import job_submit
from jobs.spec import parse_spec
from scheduling.cluster.job_manifests import job_manifest
from scheduling.cluster.simulated_logs import failure_summary
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.models import SimClaim, SimJob, SimNode, SimOutsideJob
from scheduling.snapshot import to_cluster_job
from tenants.models import Membership, PriorityTier, Quota, Team

TIERS = [
    ("production", 1000, False, 120, "Deadlines and serving models; never preempted, never borrows."),
    ("standard", 100, True, 60, "Everyday training; may borrow idle GPUs."),
    ("experiment", 10, True, 30, "Sweeps and try-outs; first to make room."),
]
# (slug, name, share of the cluster's GPUs in eighths, borrowing limit in eighths or None, tiers)
TEAMS = [
    ("finance", "Finance forecasting", 2, 1, ("production", "standard", "experiment")),
    ("perception", "Perception", 3, None, ("production", "standard", "experiment")),
    ("maps", "Maps", 2, 1, ("standard", "experiment")),
    ("research", "Research", 1, 2, ("standard", "experiment")),
]
# R4's reservations, told in order. The jobs queue a second apart in this order, so the first
# cycle places them in it, best fit (R11): nodes 01-03 each take two 3-GPU jobs, node-04
# finance's 4-GPU job, and the kubectl job adopted from the cluster fills one 2-GPU gap. That
# leaves 8 GPUs free, enough quota for finance's 1 x 8 gang (4 of them borrowed) but on no
# single node, and with its team borrowing the gang may reclaim nothing (R6); research sits
# at its borrowing limit, so its Katib trials wait. Once the gang has waited
# STARVATION_AFTER it reserves node-04, the node due to empty first; when a research job
# ends, the experiment behind it backfills node-03 meanwhile, and the gang starts when
# node-04 empties.
JOBS = [
    # (team, name, tier, workers, gpus per worker, simulated seconds, ended as)
    ("research", "llm-distill-ablation", "standard", 3, 1, 300, None),
    ("research", "speech-encoder-pretrain", "standard", 1, 3, 330, None),
    ("research", "retrieval-pretrain", "standard", 1, 3, 120, None),
    ("perception", "segformer-finetune", "standard", 3, 1, 360, None),
    ("research", "tokenizer-scaling", "standard", 3, 1, 270, None),
    ("maps", "road-graph-gnn", "standard", 1, 3, 300, None),
    ("finance", "risk-forecast-nightly", "standard", 2, 2, 180, None),
    ("finance", "llm-compliance-eval", "standard", 1, 8, 240, None),
    ("research", "diffusion-sweep-lr", "experiment", 2, 1, 90, None),
    ("maps", "tile-superres-baseline", "standard", 1, 1, 90, Job.State.SUCCEEDED),
    ("research", "moe-routing-probe", "experiment", 2, 1, 60, Job.State.FAILED),
    ("finance", "fraud-gbdt-refresh", "standard", 1, 2, 120, Job.State.SUCCEEDED),
]


class Command(BaseCommand):
    help = ("Create the demo world (simulated nodes, teams with a datasets claim, tiers, users admin/lead/engineer, "
            "jobs, a kubectl job and a Katib sweep for reconcile to adopt); safe to rerun.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=4, help="Simulated nodes (default 4).")
        parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8).")

    def handle(self, *args, nodes: int, gpus_per_node: int, **options):
        if not 1 <= nodes <= 1000 or not 1 <= gpus_per_node <= 64:
            raise CommandError("--nodes must be 1..1000 and --gpus-per-node 1..64.")
        password = os.environ.get("DEMO_PASSWORD", "demo")
        created = 0
        with transaction.atomic():
            created += self.seed_nodes(nodes, gpus_per_node)
            tiers, new_tiers = self.seed_tiers()
            created += new_tiers
            teams, new_teams = self.seed_teams(nodes * gpus_per_node, tiers)
            created += new_teams
            created += self.seed_claims(teams)
            created += self.seed_users(password, teams)
            created += self.seed_jobs(teams)
            created += self.seed_outside()
        self.stdout.write(f"Demo world ready ({created} rows created). Log in as admin, lead or engineer "
                          f"with password {password!r}.")  # fmt: skip

    def seed_outside(self) -> int:
        """Jobs from elsewhere, for reconcile to adopt: a kubectl TFJob in perception and a Katib
        experiment of 6 trials in research, a sweep that flows through the queue within its cap."""
        if SimOutsideJob.objects.exists():
            return 0
        now = timezone.now()
        made = [outside_examples.kubectl_job(team="perception", name="bert-pretrain", user="engineer")]
        made += outside_examples.katib_trials(team="research", experiment="tune-lr", trials=6, gpu=2)
        for manifest in made:
            simulated_outside.add(manifest, now=now)
        return len(made)

    def seed_nodes(self, count: int, gpus: int) -> int:
        made = 0
        for index in range(1, count + 1):
            _, new = SimNode.objects.get_or_create(
                name=f"node-{index:02d}", defaults={"gpu": gpus, "cpu": 8000 * gpus, "memory": 64 * 1024**3 * gpus}
            )
            made += new
        return made

    def seed_tiers(self) -> tuple[dict[str, PriorityTier], int]:
        tiers, made = {}, 0
        for name, value, preemptible, grace, description in TIERS:
            tiers[name], new = PriorityTier.objects.get_or_create(
                name=name,
                defaults={"value": value, "preemptible": preemptible, "grace_period": grace, "description": description},
            )
            made += new
        return tiers, made

    def seed_teams(self, capacity: int, tiers: dict[str, PriorityTier]) -> tuple[dict[str, Team], int]:
        teams, made = {}, 0
        for slug, name, share, borrow, allowed in TEAMS:
            team, new = Team.objects.get_or_create(slug=slug, defaults={"name": name, "default_tier": tiers["standard"]
                                                                        if "standard" in allowed else None})  # fmt: skip
            made += new
            if new:
                team.tiers.set([tiers[tier] for tier in allowed])
                Quota.objects.create(team=team, resource="gpu", nominal=capacity * share // 8,
                                     borrowing_limit=None if borrow is None else capacity * borrow // 8,
                                     max_per_replica=8)  # fmt: skip
                Quota.objects.create(team=team, resource="cpu", nominal=capacity * share // 8 * 8000,
                                     default_per_replica=2000, max_per_replica=64000)  # fmt: skip
                Quota.objects.create(team=team, resource="memory", nominal=capacity * share // 8 * 64 * 1024**3,
                                     default_per_replica=8 * 1024**3)  # fmt: skip
            teams[slug] = team
        return teams, made

    def seed_claims(self, teams: dict[str, Team]) -> int:
        """A `datasets` claim in every team's namespace of the simulated cluster, for jobs to mount."""
        made = 0
        for slug in teams:
            made += SimClaim.objects.get_or_create(namespace=slug, name="datasets", defaults={"capacity": 2 * 1024**4})[1]
        return made

    def seed_users(self, password: str, teams: dict[str, Team]) -> int:
        User = get_user_model()
        made = 0
        for username, staff, roles in (
            ("admin", True, {}),
            ("lead", False, {"perception": Membership.Role.LEAD}),
            ("engineer", False, {"maps": Membership.Role.MEMBER, "research": Membership.Role.MEMBER}),
        ):
            user, new = User.objects.get_or_create(username=username, defaults={"is_staff": staff, "is_superuser": staff})
            if new:
                user.set_password(password)
                user.save()
                made += 1
            for slug, role in roles.items():
                made += Membership.objects.get_or_create(user=user, team=teams[slug], defaults={"role": role})[1]
        return made

    def seed_jobs(self, teams: dict[str, Team]) -> int:
        User = get_user_model()
        owners = {"perception": "lead", "finance": "admin", "maps": "engineer", "research": "engineer"}
        made = 0
        demo_kinds = kinds.all_kinds()[:2]  # TFJob and PyTorchJob, alternately
        # Queue times a second apart, in JOBS order: the jobs' ids alone would not keep it (R3
        # breaks queue-time ties by id as text, so job 10 goes before job 2).
        first_queued = timezone.now() - timedelta(seconds=len(JOBS))
        for index, (slug, name, tier, workers, gpus, seconds, ended) in enumerate(JOBS):
            key = f"demo-{name}"  # by name, not position: reordering JOBS adds no duplicates
            if Job.objects.filter(team=teams[slug], idempotency_key=key).exists():
                continue
            # A max_runtime a minute past the run: expected ends (R14), and so the reservation's start,
            # stay close to when the simulated jobs really end.
            spec = parse_spec({
                "team": slug, "name": name, "kind": demo_kinds[index % 2].name, "image": demo_kinds[index % 2].example_image,
                "command": ["python", "/app/train.py"], "args": ["--epochs", "10"], "tier": tier,
                "max_runtime": seconds + 60, "simulate": {"duration": seconds, "fail": ended == Job.State.FAILED},
                "replicas": [{"role": "Worker", "count": workers, "gpu": gpus, "cpu": "4", "memory": "16Gi"}],
                # PyTorch jobs read the team's datasets claim, with a larger /dev/shm for DataLoader workers.
                **({"volumes": [{"claim": "datasets", "path": "/data", "read_only": True}], "shm": "8Gi"}
                   if index % 2 else {}),
            })  # fmt: skip
            owner = User.objects.get(username=owners[slug])
            job, _ = job_submit(team=teams[slug], spec=spec, owner=owner, via="seed_demo", idempotency_key=key)
            made += 1
            if ended:
                self.finish(job, ended, seconds)
            else:
                Job.objects.filter(pk=job.pk).update(queued_at=first_queued + timedelta(seconds=index))
        return made

    def finish(self, job: Job, state: str, seconds: int) -> None:
        """Give a seeded job a past: admitted on the first node, ran and ended an hour ago (written directly, as history).

        The simulated cluster keeps the ended job too, so its page shows the replicas' logs.
        """
        end = timezone.now() - timedelta(hours=1)
        start = end - timedelta(seconds=seconds)
        placement = [SimNode.objects.order_by("name").values_list("name", flat=True).first()] * job.replica_count
        Job.objects.filter(pk=job.pk).update(state=state, admitted_at=start, started_at=start, finished_at=end,
                                              queued_at=start, reason="", reason_code="", placement=placement)  # fmt: skip
        job.refresh_from_db()
        cluster_job = to_cluster_job(job)
        sim = SimJob(job_id=job.pk, namespace=cluster_job.namespace, name=cluster_job.name, kind=job.kind,
                     manifest=job_manifest(cluster_job), created_at=start, started_at=start, duration=seconds,
                     fail=state == Job.State.FAILED, finished_at=end, succeeded=state == Job.State.SUCCEEDED)  # fmt: skip
        sim.message = "Completed." if sim.succeeded else failure_summary(sim, settings.SIM_SEED)
        sim.save()
        word = "Succeeded" if sim.succeeded else "Failed"
        JobEvent.objects.filter(job=job, kind=JobEvent.Kind.SUBMITTED).update(at=start)
        for kind, old, new, message, at in (
            (JobEvent.Kind.ADMITTED, "queued", "admitted", "Admitted: all replicas placed at once.", start),
            (JobEvent.Kind.RUNNING, "admitted", "running", "Running: all replicas started.", start),
            (state, "running", state, f"{word}: {sim.message}", end),
        ):
            event = JobEvent.objects.create(job=job, kind=kind, from_state=old, to_state=new, message=message)
            JobEvent.objects.filter(pk=event.pk).update(at=at)
