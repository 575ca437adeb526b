"""The simulated cluster: nodes and jobs kept in the database, in real time.

It behaves like Volcano with the Training Operator, in miniature: a created job
starts only when every replica has room at once (gang), runs for its duration,
then succeeds or fails, unless it runs past its max runtime first (its manifest's
activeDeadlineSeconds, counted in wall time from its latest start), when it fails as the
operator fails it (DeadlineExceeded); a replica evicted by a drain waits for room, its job's
training stalled until it runs again; a suspended job frees its nodes at once
and keeps the work up to its last checkpoint (its log saves one every 5 minutes
of training), so a resumed job runs again what it had done since, as a real
preempted job restarts from its last checkpoint. The demo and most tests run on it, through
the same port as the Kubernetes adapter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import F, FloatField, Func, Q, QuerySet
from django.utils import timezone

from scheduling.cluster import job_manifests, node_types, simulated_logs, simulated_outside, simulated_replicas
from scheduling.cluster.base import (
    LOG_TAIL,
    ClaimInfo,
    ClusterJob,
    ExperimentResult,
    Finding,
    JobStatus,
    JobStatuses,
    LogPosition,
    LogStream,
    NodeInfo,
    OutsideJob,
    OutsideJobs,
    OutsidePod,
    Phase,
    ReplicaLog,
    Tenants,
    TrialResult,
    WaitingPod,
    check_claims,
)
from scheduling.models import SimClaim, SimJob, SimNode, lock_simulated_room


CORDONED = "cordoned"  # why a simulated node takes no new job: the only way it does
_STALL_FIELDS = ("stalled_since", "stalls")  # saved with a running job's replicas waiting for a node (`advance`)
# Why a replica evicted by a drain waits (`drain`): the simulated cluster places it as soon as a node has room.
UNPLACED = "its node was drained, and no node that takes pods has room for it"
GANG_WAITS = "its gang waits for room on the nodes for every replica at once"  # why a created job's replicas wait


class SimulatedCluster:
    def __init__(self, *, clock: Callable[[], datetime] = timezone.now, seed: int | None = None,
                 failure_rate: float | None = None, default_duration: int | None = None):  # fmt: skip
        self.clock = clock
        self.seed = settings.SIM_SEED if seed is None else seed
        self.failure_rate = settings.SIM_FAILURE_RATE if failure_rate is None else failure_rate
        self.default_duration = default_duration or settings.SIM_DEFAULT_DURATION

    # --- reads ------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        """Every node by name; a cordoned one (`schedulable` off: `cordon`) is marked so, and takes no new job."""
        return [
            NodeInfo(name=node.name, gpu=node.gpu, cpu=node.cpu, memory=node.memory,
                     labels=tuple(sorted((str(k), str(v)) for k, v in (node.labels or {}).items())),
                     unschedulable="" if node.schedulable else CORDONED)
            for node in SimNode.objects.order_by("name")
        ]

    def outside_usage(self) -> list[OutsidePod]:
        return []

    def job_statuses(self, *, with_outside: bool = False) -> JobStatuses:
        """Every simulated job with its phase, and a running one with its last checkpoint of this run, as its
        log says (the report a real job's training makes with `gangway checkpoint`). No pod outlives its
        job here (a deleted or suspended job frees its nodes at once), so there are never strays. With
        `with_outside`, the jobs from elsewhere too (`JobStatuses.outside`)."""
        self.advance()
        now = self.clock()
        adopted = simulated_outside.adopted_ids()
        # Manifests are never read here (a running job's pods come from its stored replicas); an ended job
        # has no pods, so not even those: the cluster keeps many of them.
        unfinished = SimJob.objects.filter(finished_at__isnull=True).defer("manifest")
        ended = SimJob.objects.filter(finished_at__isnull=False).defer("manifest", "hint", "replicas")
        jobs = sorted([*unfinished, *ended], key=lambda job: job.job_id)
        return JobStatuses((_status(job, now, adopted=job.job_id in adopted) for job in jobs),
                           outside=simulated_outside.outside_jobs() if with_outside else None)  # fmt: skip

    def outside_jobs(self) -> OutsideJobs:
        self.advance()
        return simulated_outside.outside_jobs()

    def outside_job_here(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        return simulated_outside.here(kind, namespace, name, uid)

    def mark_outside(self, job: OutsideJob, *, job_id: int | None = None, rejected: str = "",
                     cancelled: str = "", released: str = "") -> bool:
        """As the Kubernetes adapter marks one; a release writes nothing (the simulated cluster keeps no
        events)."""
        if released:
            return False
        return simulated_outside.mark(job, job_id=job_id, rejected=rejected, cancelled=cancelled)

    def trials(self, namespace: str) -> list[TrialResult]:
        self.advance()
        return simulated_outside.trials(self.seed, namespace)

    def experiments(self, namespace: str) -> list[ExperimentResult]:
        self.advance()
        return simulated_outside.experiments(self.seed, namespace)

    # --- writes -----------------------------------------------------------------
    def create_job(self, job: ClusterJob) -> None:
        """Create the job, or resume it when it exists suspended; a second create changes nothing."""
        check_claims(self, job)
        if job.adopted:
            if not simulated_outside.exists(job):
                return  # deleted by its owner: reconcile cancels it in Gangway
            simulated_outside.admitted(job)
        with transaction.atomic():
            _lock_unfinished()
            manifest = job_manifests.job_manifest(job)
            # get_or_create: a reconcile and a cycle in two workers may create the same job at once; the
            # second finds the first's row (a 409 from the real API server), never a duplicate-key error.
            # Only the columns a resume reads: a create that finds its job never reads its manifest.
            existing, created = SimJob.objects.select_for_update().only("suspended").get_or_create(
                job_id=job.job_id, defaults=dict(
                    namespace=job.namespace, name=job.name, kind=job.kind, manifest=manifest,
                    replicas=simulated_replicas.from_manifest(manifest), created_at=self.clock(),
                    hint=list(job.placement), duration=self._duration(job), fail=self._fails(job),
                    deadline=job.max_runtime or None,
                ))  # fmt: skip
            if not created and existing.suspended:
                existing.suspended, existing.hint = False, list(job.placement)
                existing.manifest, existing.replicas = manifest, simulated_replicas.from_manifest(manifest)
                existing.deadline = job.max_runtime or None
                existing.save(update_fields=["suspended", "manifest", "replicas", "hint", "deadline"])
        self.advance()

    def check_create(self, job: ClusterJob) -> None:
        """Raise what `create_job` would; the simulated cluster refuses only a claim the namespace lacks."""
        check_claims(self, job)

    def check_suspend(self, job: ClusterJob) -> None:
        """Raise what `suspend_job` would: nothing, the simulated cluster never refuses a suspend."""

    def suspend_job(self, job: ClusterJob) -> None:
        """Suspend the job: its pods stop at once and the training since its last checkpoint is lost
        (`simulated_logs.saved_progress`); a missing, suspended or ended job is left as it is."""
        now = self.clock()
        if job.adopted:
            simulated_outside.suspended(job)
        with transaction.atomic():
            _lock_unfinished()
            sim = SimJob.objects.select_for_update().defer("manifest").filter(job_id=job.job_id).first()
            if sim is None or sim.suspended or sim.finished_at:
                return
            if sim.started_at:
                sim.progress = simulated_logs.saved_progress(sim, now)
                _stop(sim)
            sim.suspended, sim.started_at, sim.nodes, sim.unplaced = True, None, [], 0
            sim.save(update_fields=["suspended", "started_at", "nodes", "unplaced", "progress", *_STALL_FIELDS])
        self.advance()

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        """Delete the job of that kind and name; one of another kind is left alone, a missing one is success."""
        with transaction.atomic():
            _lock_unfinished()
            doomed = SimJob.objects.filter(namespace=namespace, name=name, kind=kind)
            # Its pods stop first, giving their room back, so the delete leaves no node to count again.
            running = doomed.filter(started_at__isnull=False, finished_at__isnull=True)
            for sim in running.select_for_update().defer("manifest"):
                _stop(sim)
                sim.save(update_fields=["started_at", "nodes", "unplaced", *_STALL_FIELDS])
            doomed.delete()
        self.advance()

    def claims(self, namespace: str) -> list[ClaimInfo]:
        return [
            ClaimInfo(namespace=namespace, name=claim.name, capacity=claim.capacity,
                      access_modes=(claim.access_mode,), phase="Bound")  # fmt: skip
            for claim in SimClaim.objects.filter(namespace=namespace).order_by("name")
        ]

    def logs(self, namespace: str, job_id: int, *, name: str = "", replica: str = "",
             tail: int | None = LOG_TAIL, lines_of: str | None = None, timed: bool = False,
             after: dict[str, LogPosition] | None = None) -> list[ReplicaLog]:
        self.advance()
        job = SimJob.objects.filter(namespace=namespace, job_id=job_id).first()
        if job is None:
            return []
        return simulated_logs.replica_logs(job, self.clock(), self.seed, replica=replica, tail=tail, lines_of=lines_of,
                                           timed=timed, after=after)  # fmt: skip

    def log_stream(self, namespace: str, job_id: int, *, replica: str, name: str = "") -> LogStream | None:
        self.advance()
        job = SimJob.objects.filter(namespace=namespace, job_id=job_id).first()
        if job is None:
            return None
        return simulated_logs.replica_stream(job, self.clock(), self.seed, replica=replica)

    def sync_tenants(self, tenants: Tenants) -> list[str]:
        return []  # the simulated cluster has no namespaces, quotas or queues to keep in line

    def doctor(self, tenants: Tenants) -> list[Finding]:
        findings = []
        every = self.nodes()
        nodes = [node for node in every if node.schedulable]  # what the checks below count, as on Kubernetes
        if not every:
            findings.append(Finding("The simulated cluster has no nodes.", "Run `manage.py seed_demo` to add some."))
        elif not nodes:
            findings.append(Finding(f"None of the {len(every)} nodes of the simulated cluster accepts jobs: all are cordoned.",
                                    "Uncordon them (`manage.py cordon --uncordon NODE`)."))
        capacity = sum(node.gpu for node in nodes)
        nominal = sum(team.nominal.get("gpu", 0) for team in tenants.teams)
        if nominal > capacity:
            findings.append(Finding(
                f"Teams' nominal GPU quotas sum to {nominal}, above the {capacity} GPUs of the cluster.",
                "Lower some nominal quotas so every team's guarantee can be kept.",
            ))  # fmt: skip
        findings += [Finding(f"The {problem}: a write went around the simulated cluster.",
                             "Empty the node's used figures in the admin: the next pass counts them again from what runs.")
                     for problem in simulated_replicas.kept_room_drift()]  # fmt: skip
        return findings + node_types.type_findings(nodes, tenants)

    # --- the passage of time ------------------------------------------------------
    def advance(self) -> None:
        """End the jobs whose time is up, then place again the replicas of running jobs whose pods wait for a
        node (`drain`), each where it fits, then start, in creation order, the jobs that now fit. A running job
        short of a replica stalls from the first pass that finds it so to the one that places its last replica
        again (`SimJob.stalled_since`): its training neither goes on nor ends meanwhile.

        Every create and suspend passes here (80 such calls in a cycle on a busy cluster), so it reads
        only the unfinished jobs it may change: those waiting, those whose time is up (found by the
        database, `_moving`) and those stored without their replicas, each as a few values (`_Pass`); the
        room left comes from the nodes' kept figures (`simulated_replicas`), read only for the nodes that
        could take a replica waiting, never summed over the running jobs. The jobs this pass ends or
        starts are read as models, and written, with their nodes' figures.
        """
        now = self.clock()
        with transaction.atomic():
            _lock_unfinished()
            rows = [_Pass(*values) for values in _moving(now).values_list(*_Pass._fields)]
            jobs = SimJob.objects.defer("manifest").in_bulk(
                [row.pk for row in rows if row.replicas is None or row.waiting or row.unplaced or row.due(now)])
            for index, row in enumerate(rows):
                if row.replicas is None:  # written without them (before the column): read once, then kept
                    job = jobs[row.pk]
                    job.replicas = simulated_replicas.from_manifest(job.manifest)
                    job.save(update_fields=["replicas"])
                    rows[index] = row._replace(replicas=job.replicas)
            ending = [row for row in rows if row.due(now)]
            short = [row for row in rows if row.unplaced and not row.due(now)]
            waiting = [row for row in rows if row.waiting]
            if ending or short or waiting:
                simulated_replicas.count_uncounted()  # before any figure moves: it counts what runs now
            freed: list[tuple[list[str], list[dict]]] = []
            for row in ending:
                job = jobs[row.pk]
                stalled = sum(seconds for _, seconds in job.stalls or ())
                done = job.started_at + timedelta(seconds=job.duration - job.progress + stalled)
                trained = job.progress + simulated_logs.trained(job, now) >= job.duration  # not while it stalls
                cut = simulated_logs.deadline_at(job)
                if cut is not None and (cut <= done or not trained):  # its deadline first: the operator fails it
                    job.finished_at, job.succeeded = min(cut, now), False
                    job.message = simulated_logs.deadline_summary(job)[:300]
                else:
                    job.finished_at, job.succeeded = min(done, now), not job.fail
                    job.message = simulated_logs.failure_summary(job, self.seed)[:300] if job.fail else "Completed."
                freed.append((job.nodes, row.replicas))
                job.nodes, job.unplaced = [], 0
                job.save(update_fields=["finished_at", "succeeded", "message", "nodes", "unplaced"])
            simulated_replicas.give_back(simulated_replicas.taken(freed))
            if not (short or waiting):
                return
            free, labels = simulated_replicas.room(
                _least(simulated_replicas.needs_of(row.replicas) for row in short + waiting))
            placed: list[tuple[list[str], list[dict]]] = []
            # Replicas of running jobs first: the rest of their gangs hold their room meanwhile.
            for row in short:
                job = jobs[row.pk]
                stalling = job.stalled_since is None  # the first pass to find it short: its gang waits from now
                if stalling:
                    job.stalled_since = now
                again = _place_again(job, free, labels)
                if any(again):
                    job.nodes = [node or new for node, new in zip(job.nodes, again)]
                    job.unplaced = job.nodes.count("")
                    placed.append((again, row.replicas))
                if not job.unplaced:
                    _train_again(job, now)
                if stalling or any(again):
                    job.save(update_fields=["nodes", "unplaced", *_STALL_FIELDS])
            for row in waiting:
                job = jobs[row.pk]
                nodes = _place(job, free, labels)
                if nodes is not None:
                    job.started_at, job.nodes = now, nodes
                    job.save(update_fields=["started_at", "nodes"])
                    placed.append((nodes, row.replicas))
            simulated_replicas.take(simulated_replicas.taken(placed))

    def _duration(self, job: ClusterJob) -> int:
        if job.sim_duration:
            return job.sim_duration
        rng = random.Random(self.seed * 1_000_003 + job.job_id)
        return max(10, int(rng.lognormvariate(math.log(self.default_duration), 0.5)))

    def _fails(self, job: ClusterJob) -> bool:
        if job.sim_fail:
            return True
        return random.Random(self.seed * 7_919 + job.job_id).random() < self.failure_rate


def cordon(name: str, *, schedulable: bool = False) -> bool:
    """Cordons a simulated node (`kubectl cordon`: its jobs keep running, no new job starts there), or
    uncordons it with `schedulable`; returns whether it changed (False: it already was so). Raises
    SimNode.DoesNotExist, changing nothing, for a node the simulated cluster does not have."""
    with transaction.atomic():
        node = SimNode.objects.select_for_update().get(name=name)
        if node.schedulable == schedulable:
            return False
        node.schedulable = schedulable
        node.save(update_fields=["schedulable"])
    return True


def drain(name: str) -> int:
    """Drains a simulated node, as `kubectl drain` does (or as its node failing would): cordons it, and evicts
    the replicas running there. The operator makes each evicted pod again, and it waits for room on a node
    that takes pods (its entry in its job's `nodes` is "", counted in `SimJob.unplaced`): the cluster's next
    pass places it where it fits (`_place_again`), and until then its job runs short of it, the rest of its
    gang holding their GPUs (R13 evicts a job short for ADMISSION_TIMEOUT). Its training stalls meanwhile, as
    a real gang waits for a lost member at its next collective: from that pass (`advance`) until its last
    replica runs again it neither trains nor ends. Returns how many replicas it evicted.
    Raises SimNode.DoesNotExist, changing nothing, for a node the simulated cluster does not have."""
    evicted = 0
    with transaction.atomic():
        _lock_unfinished()
        drained = SimNode.objects.select_for_update().get(name=name)
        if drained.schedulable:
            drained.schedulable = False
            drained.save(update_fields=["schedulable"])
        running = SimJob.objects.select_for_update().defer("manifest").filter(started_at__isnull=False,
                                                                               finished_at__isnull=True)  # fmt: skip
        for sim in running:
            if name not in sim.nodes:
                continue
            there = [node if node == name else "" for node in sim.nodes]
            simulated_replicas.give_back(simulated_replicas.taken([(there, simulated_replicas.groups(sim))]))
            sim.nodes = ["" if node == name else node for node in sim.nodes]
            sim.unplaced = sim.nodes.count("")
            sim.save(update_fields=["nodes", "unplaced"])
            evicted += there.count(name)
    return evicted


class _Pass(NamedTuple):
    """What `advance` reads of each unfinished job it may change (`_moving`)."""

    pk: int
    started_at: datetime | None
    progress: float
    duration: int
    suspended: bool
    nodes: list[str]
    replicas: list[dict] | None
    unplaced: int  # replicas of a running job whose pods wait for a node again
    stalled_since: datetime | None  # its training stalled since then, a replica waiting for a node again
    stalls: list | None  # its run's stalls that ended (`SimJob.stalls`)
    deadline: int | None  # its activeDeadlineSeconds (`SimJob.deadline`)

    @property
    def waiting(self) -> bool:
        """Created (or resumed) and not started: waiting for room for every replica at once."""
        return not self.started_at and not self.suspended

    def due(self, now: datetime) -> bool:
        """Whether it trained its whole duration by `now` (its stalls not counted: `simulated_logs.trained`), or
        ran past its deadline (`simulated_logs.deadline_at`, stalls counted)."""
        cut = simulated_logs.deadline_at(self)
        return bool(self.started_at) and (self.progress + simulated_logs.trained(self, now) >= self.duration
                                          or (cut is not None and cut <= now))  # fmt: skip


def _lock_unfinished() -> None:
    """Locks the unfinished simulated jobs and the room they take against every other write, all at once
    (`lock_simulated_room`), to the end of the caller's transaction.

    Every write and every pass (`advance`) takes it first, then locks the rows it changes: a write that
    locked its own job first and the others later could deadlock with another transaction doing the
    same the other way round. It used to lock every unfinished job row by row (2,000 on a busy cluster,
    at each of a cycle's 80 creates and suspends); one lock costs the same for any number of jobs.
    """
    lock_simulated_room()


def _moving(now: datetime) -> QuerySet[SimJob]:
    """The unfinished simulated jobs a pass at `now` may change, in creation order, each locked as it is read:
    those waiting for room, running ones with replicas waiting for a node again (`drain`), those stored
    without their replicas, and those whose time is up by the database's reckoning (their training done, or
    their deadline past), with a second to spare (`_Pass.due` then decides to the microsecond). The database
    does not count the time a job stalled, which only ever ends it later: one that stalled is read from when it
    would have ended without, and left as due decides."""
    waiting = Q(started_at__isnull=True, suspended=False)
    short = Q(started_at__isnull=False, unplaced__gt=0)
    due = Q(started_at__isnull=False, ends__lte=now.timestamp() + 1)
    past = Q(started_at__isnull=False, deadline__isnull=False, cut__lte=now.timestamp() + 1)
    unfinished = SimJob.objects.select_for_update().filter(finished_at__isnull=True)
    ends = _Epoch(F("started_at")) + F("duration") - F("progress")
    cut = _Epoch(F("started_at")) + F("deadline")
    return (unfinished.alias(ends=ends, cut=cut).filter(waiting | short | due | past | Q(replicas__isnull=True))
            .order_by("created_at", "job_id"))  # fmt: skip


class _Epoch(Func):
    """Seconds from 1970 to a datetime, in SQL: PostgreSQL's EXTRACT, or SQLite's julianday (the demo's
    database, which stores a datetime as text)."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM %(expressions)s)"

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)",
                           **extra_context)  # fmt: skip


def _least(needs: Iterable[list[simulated_replicas.Need]]) -> simulated_replicas.Need:
    """Returns the least GPUs, CPU and memory (each on its own) that one of these replicas needs (of each
    job's, `needs_of`); (0, 0, 0) when there are none."""
    every = [need for job in needs for need in job]
    if not every:
        return 0, 0, 0
    return min(need[0] for need in every), min(need[1] for need in every), min(need[2] for need in every)


def _stop(sim: SimJob) -> None:
    """Stops a running job's pods: gives their room back to its nodes, and clears its start, its nodes, its
    replicas waiting for one and its run's stalls on the row as read (the caller saves them)."""
    simulated_replicas.give_back(simulated_replicas.taken_by(sim))
    sim.started_at, sim.nodes, sim.unplaced = None, [], 0
    sim.stalled_since, sim.stalls = None, []


def _train_again(job: SimJob, now: datetime) -> None:
    """Every replica of the running job placed again at `now`: its stall ends, kept in its run's stalls with
    where its training stood (a stall that ends in the pass that began it leaves none); nothing for a job
    that had not stalled. The caller saves it."""
    if job.stalled_since is None:
        return
    seconds = (now - job.stalled_since).total_seconds()
    if seconds > 0:
        at = job.progress + simulated_logs.trained(job, job.stalled_since)
        job.stalls = [*(job.stalls or ()), [at, seconds]]
    job.stalled_since = None


def _take(room: list[int], need: tuple[int, int, int]) -> None:
    for index, amount in enumerate(need):
        room[index] -= amount


def _admits(terms: list[dict], name: str, labels: dict[str, str]) -> bool:
    """Whether node `name` with `labels` satisfies required node affinity `terms` as the Kubernetes scheduler
    decides it: some term, not empty, whose every label expression and field expression (metadata.name) holds.
    No terms: every node."""

    def holds(expression: dict, values_of: dict[str, str]) -> bool:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or ()
        if operator == "In":
            return values_of.get(key) in values
        if operator == "NotIn":
            return values_of.get(key) not in values
        if operator == "Exists":
            return key in values_of
        if operator == "DoesNotExist":
            return key not in values_of
        return False  # Gt and Lt compare numbers, which no label Gangway pins holds

    def matches(term: dict) -> bool:
        expressions, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
        return bool(expressions or fields) and all(holds(e, labels) for e in expressions) and all(
            holds(f, {"metadata.name": name}) for f in fields)

    return not terms or any(matches(term) for term in terms)


def _place(job: SimJob, free: dict[str, list[int]], labels: dict[str, dict[str, str]]) -> list[str] | None:
    """Nodes for every replica at once (each replica's hinted node first, then first fit), only on nodes its
    required node affinity admits (a job pinned to a GPU type runs on that type's nodes alone), or None."""
    trial = {name: list(room) for name, room in free.items()}
    chosen = []
    for index, (need, terms) in enumerate(zip(simulated_replicas.needs(job), simulated_replicas.terms(job))):
        hinted = [job.hint[index]] if index < len(job.hint) and job.hint[index] in trial else []
        for name in hinted + sorted(trial):
            if _admits(terms, name, labels.get(name, {})) and all(have >= want for have, want in zip(trial[name], need)):
                _take(trial[name], need)
                chosen.append(name)
                break
        else:
            return None
    free.update(trial)
    return chosen


def _place_again(job: SimJob, free: dict[str, list[int]], labels: dict[str, dict[str, str]]) -> list[str]:
    """The node each replica of running `job` whose pod waits for one (its entry in `nodes` is "") takes now,
    first fit, only on nodes its required node affinity admits; "" for the other replicas (placed already, or
    finding no room). Takes their room from `free`. Each replica goes on its own, not the gang at once: the
    rest of its gang runs, as Volcano places a lost pod of a started job."""
    again = [""] * len(job.nodes)
    for index, (need, terms) in enumerate(zip(simulated_replicas.needs(job), simulated_replicas.terms(job))):
        if index >= len(job.nodes) or job.nodes[index]:
            continue
        for name in sorted(free):
            if _admits(terms, name, labels.get(name, {})) and all(have >= want for have, want in zip(free[name], need)):
                _take(free[name], need)
                again[index] = name
                break
    return again


def _status(job: SimJob, now: datetime, *, adopted: bool = False) -> JobStatus:
    if job.finished_at:
        phase = Phase.SUCCEEDED if job.succeeded else Phase.FAILED
    elif job.suspended:
        phase = Phase.SUSPENDED
    elif job.started_at:
        phase = Phase.RUNNING
    else:
        phase = Phase.CREATED
    message = job.message
    if phase is Phase.CREATED:
        message = "Waiting for room on the nodes for every replica at once."
    running = phase is Phase.RUNNING
    pods = tuple(
        OutsidePod(namespace=job.namespace, name=f"{job.name}-{index}", node=node, gpu=gpu, cpu=cpu, memory=memory)
        for index, (node, (gpu, cpu, memory)) in enumerate(zip(job.nodes, simulated_replicas.needs(job))) if node
    ) if running else ()  # fmt: skip
    # A replica evicted by a drain waits for a node again (`drain`): its pod, made again, is pending; a job
    # created (or resumed) and not started waits with every replica, as its pending pods do on Kubernetes.
    waiting = tuple(WaitingPod(replica=name, why=UNPLACED)
                    for name, node in zip(simulated_replicas.names(job), job.nodes) if not node
                    ) if running and job.unplaced else ()  # fmt: skip
    if phase is Phase.CREATED:
        waiting = tuple(WaitingPod(replica=name, why=GANG_WAITS) for name in simulated_replicas.names(job))
    nodes = tuple(node for node in job.nodes if node)
    return JobStatus(
        job_id=job.job_id, name=job.name, namespace=job.namespace, kind=job.kind, phase=phase, message=message,
        running_pods=len(nodes) if running else 0, nodes=nodes, pods=pods, adopted=adopted, waiting_pods=waiting,
        checkpointed_at=simulated_logs.last_checkpoint(job, now),
    )  # fmt: skip
