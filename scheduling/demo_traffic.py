"""The demo's traffic: people submitting a job now and then, and a Katib sweep once in a while, so the
queue, backfill, reservations and preemption keep moving after the seeded story has played out.

`make demo` turns it on (DEMO_TRAFFIC, the seconds between two looks at the queue); it runs on the
simulated cluster only. Each look submits one job while fewer than QUEUE_TARGET wait, going round
TEMPLATES in order, so a demo tells the same story every time it runs.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils import timezone

from jobs import kinds
from jobs.models import Job
from jobs.services import QueueFull, job_submit
from jobs.spec import parse_spec
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.models import SimOutsideJob
from tenants.models import Membership, Team

log = logging.getLogger("gangway.demo")

VIA = "demo traffic"
QUEUE_TARGET = 4  # jobs kept waiting, enough for the queue page to have a story
SWEEP_EVERY = 12  # one look in this many starts a Katib experiment instead of a job
SWEEP_PREFIX = "demo-sweep-"
# (team, name, tier, workers, GPUs per worker, simulated seconds, GPU types asked for)
TEMPLATES = [
    ("maps", "road-graph-gnn", "standard", 1, 2, 180, ()),
    ("research", "llm-distill", "standard", 2, 1, 240, ()),
    ("perception", "detr-finetune", "standard", 1, 4, 300, ()),
    ("finance", "risk-forecast", "standard", 2, 2, 150, ()),
    ("research", "tokenizer-probe", "experiment", 1, 1, 90, ()),
    ("perception", "vit-pretrain", "standard", 1, 8, 420, ("a100",)),
    ("maps", "tile-superres", "experiment", 2, 1, 120, ()),
    # A reclaim (R6): perception's augment-search borrows the l4 GPUs others leave idle, then finance takes its
    # nominal back for a whole node, which only preempting the borrower gives.
    ("perception", "augment-search", "experiment", 6, 3, 900, ("l4",)),
    ("finance", "quarter-close", "production", 1, 8, 300, ()),
    ("finance", "fraud-nightly", "production", 1, 2, 200, ()),
    ("research", "moe-routing", "standard", 1, 3, 260, ()),
    ("perception", "segformer-eval", "production", 1, 2, 120, ()),
    ("maps", "traffic-llm", "standard", 1, 4, 360, ("a100", "l4")),
]


def look(now=None) -> str:
    """Submits one job (or starts a sweep) when fewer than QUEUE_TARGET jobs wait; returns what it did."""
    if settings.CLUSTER_BACKEND != "simulated":
        return "Demo traffic runs on the simulated cluster only; nothing submitted."
    waiting = Job.objects.filter(state=Job.State.QUEUED).count()
    if waiting >= QUEUE_TARGET:
        return f"{waiting} jobs wait already; nothing submitted."
    turn = Job.objects.filter(submitted_via=VIA).count() + _sweeps_started()
    if turn % SWEEP_EVERY == SWEEP_EVERY - 1:
        return _sweep(turn, now or timezone.now())
    return _submit(turn)


def _sweeps_started() -> int:
    """The Katib experiments demo traffic started: their first trials' jobs, in the simulated cluster
    from the start (their sweeps come only once reconcile adopts them)."""
    return SimOutsideJob.objects.filter(name__startswith=SWEEP_PREFIX, name__endswith="-t000").count()


def _submit(turn: int) -> str:
    slug, name, tier, workers, gpus, seconds, types = TEMPLATES[turn % len(TEMPLATES)]
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        return f"No team {slug} (run seed_demo first); nothing submitted."
    kind = kinds.all_kinds()[turn % 2]  # TFJob and PyTorchJob, alternately
    spec = parse_spec({
        "team": slug, "name": f"{name}-{turn + 1}", "kind": kind.name, "image": kind.example_image,
        "command": ["python", "/app/train.py"], "tier": tier, "max_runtime": seconds + 60,
        "replicas": [{"role": "Worker", "count": workers, "gpu": gpus, "cpu": "4", "memory": "16Gi"}],
        "simulate": {"duration": seconds, "fail": turn % 9 == 8},  # now and then a run fails, as runs do
        **({"gpu_type": list(types)} if types else {}),
    })  # fmt: skip
    owner = Membership.objects.filter(team=team).select_related("user").order_by("pk").first()
    try:
        job, _ = job_submit(team=team, spec=spec, owner=owner.user if owner else None, via=VIA)
    except QueueFull as error:
        return str(error)
    log.info("demo traffic submitted job %s (%s of team %s)", job.pk, job.name, slug)
    return f"Submitted job {job.pk}: {job.name} of team {slug}."


def _sweep(turn: int, now) -> str:
    experiment = f"{SWEEP_PREFIX}{turn + 1}"
    for manifest in outside_examples.katib_trials(team="research", experiment=experiment, trials=4, gpu=1):
        simulated_outside.add(manifest, now=now)
    log.info("demo traffic started Katib experiment %s", experiment)
    return f"Started Katib experiment {experiment} (4 trials of team research)."
