"""Seed a believable demo world: a simulated cluster of two GPU types, teams, tiers, users and jobs.

Idempotent: every row is found by its natural key first, so running it twice
changes nothing. On a demo database seeded before GPU types it adds the types,
labels the old nodes l4 (the story below runs on them), adds the a100 nodes,
turns each team's `gpu` quota into `gpu:l4` with the same figures and adds the
a100 quotas and jobs; rows an admin changed keep their changes.
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
from tenants.models import GPU_TYPE_LABEL, GpuType, Membership, PriorityTier, Quota, Team

TIERS = [
    ("production", 1000, False, 120, "Deadlines and serving models; never preempted, never borrows."),
    ("standard", 100, True, 60, "Everyday training; may borrow idle GPUs."),
    ("experiment", 10, True, 30, "Sweeps and try-outs; first to make room."),
]
# (name, value of nvidia.com/gpu.product on its nodes, order: cheapest first, description)
GPU_TYPES = [
    ("l4", "NVIDIA-L4", 1, "24 GB; fine-tuning, evaluation and small training runs."),
    ("a100", "NVIDIA-A100-SXM4-80GB", 2, "80 GB, NVLink; large models and long pre-training."),
]
FIRST_TYPE = GPU_TYPES[0][0]  # node-01's: where seeded history ran
# (slug, name, share of the l4 GPUs in eighths, borrowing limit in eighths or None, tiers). The l4
# nodes are the cluster the story below runs on, with the quotas it had before types.
TEAMS = [
    ("finance", "Finance forecasting", 2, 1, ("production", "standard", "experiment")),
    ("perception", "Perception", 3, None, ("production", "standard", "experiment")),
    ("maps", "Maps", 2, 1, ("standard", "experiment")),
    ("research", "Research", 1, 2, ("standard", "experiment")),
]
# Share of the a100 GPUs in eighths, borrowing none: only perception and maps have a100s. The other
# teams' quotas name l4 alone, so their jobs that name no type go to l4 only (and finance's gang
# cannot dodge its wait by taking an a100 node).
A100_TEAMS = {"perception": 4, "maps": 4}
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
    # Two jobs that name GPU types, queued last: the first cycle admits them on the a100 nodes,
    # beside the story on l4 (see TYPED_JOBS).
    ("perception", "vit-huge-pretrain", "standard", 1, 8, 900, None),
    ("maps", "traffic-llm-finetune", "standard", 1, 4, 600, None),
]
# The demo's people: (username, staff, {team: role}). Each has an address at example.com, a domain that
# reaches nobody; the demo's mail is written to the worker's log (deploy/demo.sh).
USERS = (
    # The admin submits finance's jobs (the gang of the story among them), as a member of the team,
    # so its page lists whose they are.
    ("admin", True, {"finance": Membership.Role.MEMBER}),
    ("lead", False, {"perception": Membership.Role.LEAD}),
    ("engineer", False, {"maps": Membership.Role.MEMBER, "research": Membership.Role.MEMBER}),
)
# The GPU types the jobs above name, in order of preference; a job not listed names none and gets
# its team's types, cheapest first.
TYPED_JOBS = {"vit-huge-pretrain": ("a100",), "traffic-llm-finetune": ("a100", "l4")}


class Command(BaseCommand):
    help = ("Create the demo world (simulated l4 and a100 nodes, teams with a datasets claim and quotas per GPU "
            "type, tiers, users admin/lead/engineer, jobs, a kubectl job and a Katib sweep for reconcile to "
            "adopt); safe to rerun.")  # fmt: skip

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=4, help="Simulated l4 nodes, where the story runs (default 4).")
        parser.add_argument("--a100-nodes", type=int, default=2, help="Simulated a100 nodes (default 2).")
        parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8).")

    def handle(self, *args, nodes: int, a100_nodes: int, gpus_per_node: int, **options):
        if settings.CLUSTER_BACKEND != "simulated":
            # Its users (a staff admin among them) share one known password: never on a real install.
            raise CommandError(f"seed_demo builds the demo on the simulated cluster only; CLUSTER_BACKEND is "
                               f"{settings.CLUSTER_BACKEND}. Run it with CLUSTER_BACKEND=simulated and a database "
                               "of its own.")  # fmt: skip
        if not 1 <= nodes <= 1000 or not 1 <= a100_nodes <= 1000 or not 1 <= gpus_per_node <= 64:
            raise CommandError("--nodes and --a100-nodes must be 1..1000 and --gpus-per-node 1..64.")
        password = os.environ.get("DEMO_PASSWORD", "demo")
        created = 0
        with transaction.atomic():
            created += self.seed_gpu_types()
            created += self.seed_nodes({"l4": nodes, "a100": a100_nodes}, gpus_per_node)
            tiers, new_tiers = self.seed_tiers()
            created += new_tiers
            teams, new_teams = self.seed_teams(nodes * gpus_per_node, a100_nodes * gpus_per_node, tiers)
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

    def seed_gpu_types(self) -> int:
        """The demo's GPU types (GPU_TYPES); returns how many were created."""
        made = 0
        for name, value, order, description in GPU_TYPES:
            made += GpuType.objects.get_or_create(name=name, defaults={"label": GPU_TYPE_LABEL, "value": value,
                                                                       "order": order, "description": description})[1]  # fmt: skip
        return made

    def seed_nodes(self, counts: dict[str, int], gpus: int) -> int:
        """Nodes node-01, node-02, ... of each type in `counts` in turn (l4 first, the nodes the demo had
        before types), labelled with their type; a node without labels gets them, labels an admin set are
        kept. Returns how many nodes were created."""
        made, index = 0, 0
        for name, value, _, _ in GPU_TYPES:
            for _ in range(counts[name]):
                index += 1
                node, new = SimNode.objects.get_or_create(
                    name=f"node-{index:02d}", defaults={"gpu": gpus, "cpu": 8000 * gpus, "memory": 64 * 1024**3 * gpus,
                                                        "labels": {GPU_TYPE_LABEL: value}})  # fmt: skip
                if not new and not node.labels:
                    SimNode.objects.filter(pk=node.pk).update(labels={GPU_TYPE_LABEL: value})
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

    def seed_teams(self, capacity: int, a100: int, tiers: dict[str, PriorityTier]) -> tuple[dict[str, Team], int]:
        """The teams with their quotas: l4 GPUs, CPU and memory as shares of the `capacity` l4 GPUs, a100 GPUs
        (A100_TEAMS) of the `a100` ones. Returns the teams by slug and how many rows were created."""
        teams, made = {}, 0
        for slug, name, share, borrow, allowed in TEAMS:
            team, new = Team.objects.get_or_create(slug=slug, defaults={"name": name, "default_tier": tiers["standard"]
                                                                        if "standard" in allowed else None})  # fmt: skip
            made += new
            made += self.type_quotas(team, a100)
            if new:
                team.tiers.set([tiers[tier] for tier in allowed])
                Quota.objects.create(team=team, resource="gpu:l4", nominal=capacity * share // 8,
                                     borrowing_limit=None if borrow is None else capacity * borrow // 8,
                                     max_per_replica=8)  # fmt: skip
                Quota.objects.create(team=team, resource="cpu", nominal=capacity * share // 8 * 8000,
                                     default_per_replica=2000, max_per_replica=64000)  # fmt: skip
                Quota.objects.create(team=team, resource="memory", nominal=capacity * share // 8 * 64 * 1024**3,
                                     default_per_replica=8 * 1024**3)  # fmt: skip
            teams[slug] = team
        return teams, made

    def type_quotas(self, team: Team, a100: int) -> int:
        """Gives a team of a demo seeded before GPU types its quota per type: its `gpu` quota becomes `gpu:l4`
        (the old nodes are the l4 ones) with the same figures, and the a100 quota of A100_TEAMS is added once
        (for a new team too). Returns how many rows were created."""
        if team.quotas.filter(resource="gpu:a100").exists():
            return 0
        if not team.quotas.filter(resource="gpu:l4").exists():
            team.quotas.filter(resource="gpu").update(resource="gpu:l4")
        share = A100_TEAMS.get(team.slug)
        if share is None:
            return 0
        Quota.objects.create(team=team, resource="gpu:a100", nominal=a100 * share // 8, borrowing_limit=0,
                             max_per_replica=8)  # fmt: skip
        return 1

    def seed_claims(self, teams: dict[str, Team]) -> int:
        """A `datasets` claim in every team's namespace of the simulated cluster, for jobs to mount."""
        made = 0
        for slug in teams:
            made += SimClaim.objects.get_or_create(namespace=slug, name="datasets", defaults={"capacity": 2 * 1024**4})[1]
        return made

    def seed_users(self, password: str, teams: dict[str, Team]) -> int:
        """The demo's people (USERS), each with an address at example.com (a person without one was seeded
        before addresses: given one); returns how many rows were created."""
        User = get_user_model()
        made = 0
        for username, staff, roles in USERS:
            email = f"{username}@example.com"
            user, new = User.objects.get_or_create(username=username, defaults={"is_staff": staff, "is_superuser": staff,
                                                                               "email": email})  # fmt: skip
            if new:
                user.set_password(password)
                user.save()
                made += 1
            elif not user.email:
                User.objects.filter(pk=user.pk).update(email=email)
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
                **({"gpu_type": list(TYPED_JOBS[name])} if name in TYPED_JOBS else {}),
            })  # fmt: skip
            owner = User.objects.get(username=owners[slug])
            job, _ = job_submit(team=teams[slug], spec=spec, owner=owner, via="seed_demo", idempotency_key=key)
            made += 1
            if ended:
                self.finish(job, ended, seconds)
            else:
                queued = first_queued + timedelta(seconds=index)
                Job.objects.filter(pk=job.pk).update(submitted_at=queued, queued_at=queued)
                JobEvent.objects.filter(job=job, kind=JobEvent.Kind.SUBMITTED).update(at=queued)
        return made

    def finish(self, job: Job, state: str, seconds: int) -> None:
        """Give a seeded job a past: admitted on the first node (an l4 one), ran and ended an hour ago (written
        directly, as history).

        The simulated cluster keeps the ended job too, so its page shows the replicas' logs.
        """
        end = timezone.now() - timedelta(hours=1)
        start = end - timedelta(seconds=seconds)
        placement = [SimNode.objects.order_by("name").values_list("name", flat=True).first()] * job.replica_count
        Job.objects.filter(pk=job.pk).update(state=state, admitted_at=start, started_at=start, finished_at=end,
                                              submitted_at=start, queued_at=start, reason="", reason_code="",
                                              placement=placement,
                                              assigned_gpu_type=FIRST_TYPE)  # fmt: skip
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
            (JobEvent.Kind.ADMITTED, "queued", "admitted", f"Admitted on {FIRST_TYPE} GPUs: all replicas placed at once.", start),
            (JobEvent.Kind.RUNNING, "admitted", "running", "Running: all replicas started.", start),
            (state, "running", state, f"{word}: {sim.message}", end),
        ):
            event = JobEvent.objects.create(job=job, kind=kind, from_state=old, to_state=new, message=message)
            JobEvent.objects.filter(pk=event.pk).update(at=at)
