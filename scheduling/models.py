"""What the admission loop keeps: the cluster as last seen, cycle records, and the simulated cluster."""

from __future__ import annotations

import zlib

from django.db import connections, models, transaction
from django.db.models import Q


class ClusterNode(models.Model):
    """A node as the last cycle saw it, with the room pods Gangway did not create take (R12).

    Pages read this table; only the loop writes it.
    """

    name = models.CharField(max_length=253, unique=True)
    position = models.PositiveIntegerField(default=0, help_text="Node order in the snapshot (R11 ties).")
    gpu = models.PositiveIntegerField(default=0)
    cpu = models.BigIntegerField(default=0, help_text="Millicores.")
    memory = models.BigIntegerField(default=0, help_text="Bytes.")
    outside_gpu = models.PositiveIntegerField(default=0)
    outside_cpu = models.BigIntegerField(default=0)
    outside_memory = models.BigIntegerField(default=0)
    # The GPU type its labels tell (tenants.GpuType's name); "" without types, or for a GPU node
    # whose labels match no type (doctor names those: no job can be placed on them).
    gpu_type = models.CharField(max_length=63, blank=True)
    # Why it takes no new pods ("cordoned", "tainted <key>"), "" when it takes them: such a node counts
    # only for R10 (the fit preview's and submission's "can never fit"), never as capacity or free room.
    # With a database default, so a loop of the release before, mirroring only schedulable nodes, still writes rows.
    unschedulable = models.CharField(max_length=300, blank=True, default="", db_default="",
                                     help_text="Why it takes no new pods; empty when it takes them.")
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["position", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(cpu__gte=0) & Q(memory__gte=0), name="cluster_node_non_negative"),
        ]

    def __str__(self) -> str:
        return self.name


class Cycle(models.Model):
    """One admission cycle's outcome, for the dashboard, metrics and operators."""

    started_at = models.DateTimeField(db_index=True)
    duration = models.FloatField(help_text="Seconds.")
    admitted = models.PositiveIntegerField(default=0)
    preempted = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    waiting = models.PositiveIntegerField(default=0)
    cluster_reachable = models.BooleanField(default=True)
    failed = models.BooleanField(default=False, help_text="The cycle raised; its decisions were rolled back.")
    error = models.TextField(blank=True, help_text="For operators: may name the API server's address.")
    # The plan's GPU figures per team (the plan command's "teams"), which pages, the API, /metrics and
    # usage samples show; null when the cycle made no plan (the cluster unreachable, or it failed).
    gpu_usage = models.JSONField(null=True, blank=True, help_text="GPU figures per team, as the plan gave them.")
    # Whether it changed something a page shows besides itself (records.cycle_done says what): the
    # polled parts' version moves with these cycles only (selectors.live_version). True for a cycle
    # that failed, whose work may have been committed in part, and for rows written before it was kept.
    changed = models.BooleanField(default=True, help_text="It changed something the pages show.")

    class Meta:
        ordering = ["-started_at"]
        get_latest_by = "started_at"
        indexes = [
            models.Index(fields=["id"], condition=Q(changed=True), name="cycle_changes"),
            # /metrics reads every kept cycle at each scrape (records.cycle_counts, cycle_failures): the
            # durations and the failed ones from these indexes, not a week of rows with their plans' figures.
            models.Index(fields=["duration"], name="cycle_durations"),
            models.Index(fields=["id"], condition=Q(failed=True), name="cycle_failures"),
        ]

    def __str__(self) -> str:
        return self.summary

    @property
    def summary(self) -> str:
        if self.failed:
            return f"Failed: {self.error}"
        if not self.cluster_reachable:
            return f"Cluster unreachable: {self.error}"
        return f"Admitted {self.admitted}, preempted {self.preempted}, rejected {self.rejected}, waiting {self.waiting}."


class CycleTotals(models.Model):
    """What the Cycle rows pruned so far add up to (one row), so the cycle
    duration histogram stays cumulative while old rows go."""

    cycles = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    # Bucket bound (as text) -> pruned cycles that took at most that long.
    buckets = models.JSONField(default=dict)

    class Meta:
        verbose_name_plural = "cycle totals"

    def __str__(self) -> str:
        return f"{self.cycles} pruned cycles"


class Lease(models.Model):
    """Single flight for work that commits as it goes (reconcile): one row per name, held by
    whoever last moved `until` forward; it lapses by itself if its holder dies (`locks.lease`)."""

    name = models.CharField(max_length=100, primary_key=True)
    holder = models.CharField(max_length=32, blank=True, default="")
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'} until {self.until:%Y-%m-%d %H:%M:%S}"


class RefusedOutsideJob(models.Model):
    """A job from elsewhere (kubectl, a Katib trial, a Pipelines step) that asked for a team's queue and that
    Gangway refused to adopt, as reconcile last found it in the cluster: one row per refused object still
    there, so the team reads on its page what its owner reads with kubectl (`adoption.record_refused`). It
    goes when the object goes or leaves the queue, or is adopted after all."""

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="refused_outside_jobs")
    uid = models.CharField(max_length=64, unique=True, help_text="The object's uid in the cluster.")
    kind = models.CharField(max_length=40, help_text="TFJob, PyTorchJob, TrainJob, ...")
    name = models.CharField(max_length=253)
    origin = models.CharField(max_length=100, blank=True, default="",  # outside.VIA_MAX, as Job.submitted_via
                              help_text="Where it came from, as a Gangway job's submitted_via would say.")
    reason = models.TextField(help_text="Why Gangway refused it, as written on the object.")
    refused_at = models.DateTimeField(help_text="When reconcile first found it refused.")

    class Meta:
        ordering = ["-refused_at", "-id"]
        indexes = [models.Index(fields=["team", "-refused_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}, refused"


class UsageSample(models.Model):
    """A team's GPU use at one moment, recorded by the loop for the team page's chart."""

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="usage_samples")
    at = models.DateTimeField(db_index=True)
    gpu_used = models.PositiveIntegerField()
    gpu_borrowed = models.PositiveIntegerField(default=0)
    gpu_nominal = models.PositiveIntegerField(default=0)
    gpu_waiting = models.PositiveIntegerField(default=0, help_text="GPUs asked by queued jobs.")
    # The GPU type these figures are of; "" for the team's figures of all types (the only
    # sample on a cluster without types). The team page draws one chart per type from these.
    gpu_type = models.CharField(max_length=63, blank=True, default="", help_text="Empty: all GPU types.")

    class Meta:
        ordering = ["at"]
        indexes = [models.Index(fields=["team", "at"])]


class SimNode(models.Model):
    """A node of the simulated cluster (the demo's and the tests' cluster)."""

    name = models.CharField(max_length=63, unique=True)
    gpu = models.PositiveIntegerField(default=8)
    cpu = models.BigIntegerField(default=64000)
    memory = models.BigIntegerField(default=512 * 1024**3)
    schedulable = models.BooleanField(default=True)
    labels = models.JSONField(default=dict, blank=True, help_text="Node labels, e.g. nvidia.com/gpu.product.")
    # What the jobs running here take, kept by the simulated cluster as they start and stop (under
    # `lock_simulated_room`), so that a create or a suspend reads the nodes it may use, not every running
    # job. NULL until counted: a node added since the last pass (by seed_demo, the admin or a test), or
    # one a delete from outside the cluster left unsure (`SimJobQuerySet.delete`), is counted from the
    # running jobs at the next pass (`simulated_replicas.count_uncounted`).
    gpu_used = models.IntegerField(null=True, blank=True, help_text="GPUs its running jobs take; empty: not counted.")
    cpu_used = models.BigIntegerField(null=True, blank=True, help_text="Millicores its running jobs take.")
    memory_used = models.BigIntegerField(null=True, blank=True, help_text="Bytes its running jobs take.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SimClaim(models.Model):
    """A PersistentVolumeClaim of the simulated cluster, in a team's namespace."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    capacity = models.BigIntegerField(default=1024**4, help_text="Bytes.")
    access_mode = models.CharField(max_length=20, default="ReadWriteMany")

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="sim_claim_unique_name")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


SIMULATED_ROOM_LOCK = zlib.crc32(b"simulated-cluster-room")  # the key of `lock_simulated_room`


def lock_simulated_room(using: str = "default") -> None:
    """Holds the simulated cluster's room (its jobs' starts and ends, and what they take of its nodes) to
    the end of the current transaction; waits while another transaction holds it. Returns nothing.

    Every write and every pass of the simulated cluster takes it first: two creates then never both
    take a node's last room, and no two writers lock job and node rows in opposite orders. Node row
    locks in a fixed order would not do: reconcile suspends a job and places what its room lets start
    in one transaction, so it holds that job's nodes while it locks others. On PostgreSQL an advisory
    lock; SQLite (the demo) runs every transaction IMMEDIATE, which already lets one writer in at a time.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SIMULATED_ROOM_LOCK])


# The columns of a simulated job that say what room it takes, and where (`simulated_replicas.taken_by`): a write
# of one of them around the cluster's own path leaves its nodes to be counted again.
ROOM_FIELDS = frozenset({"started_at", "finished_at", "nodes", "replicas", "manifest"})


def _uncount(nodes: set[str], using: str) -> None:
    """Leaves these simulated nodes to be counted again from the running jobs at the cluster's next pass (their
    used figures NULL: `simulated_replicas.count_uncounted`); returns nothing. The caller holds
    `lock_simulated_room`, in the transaction that moved what runs there."""
    if nodes:
        SimNode.objects.using(using).filter(name__in=nodes).update(gpu_used=None, cpu_used=None, memory_used=None)


def _ran_on(jobs: models.QuerySet) -> set[str]:
    """The nodes the running ones of these simulated jobs run on, their rows locked."""
    running = jobs.filter(started_at__isnull=False, finished_at__isnull=True).select_for_update()
    return {node for nodes in running.values_list("nodes", flat=True) for node in nodes or ()}


class SimJobQuerySet(models.QuerySet):
    """Writes around the simulated cluster's own path (the admin, a benchmark's seed, a test's hand) keep the
    nodes' used figures right: the nodes a running job they touch ran on, or runs on after, are counted again
    at the next pass, in the same transaction. The cluster itself writes through `Model.save` with its
    figures (`simulated_replicas.take`, `give_back`), never through these; `invariants.kept_room_drift` tells
    a write that went around both."""

    def delete(self):
        """Deletes these jobs as `QuerySet.delete` does, and leaves the nodes a running one of them ran on
        to be counted again at the simulated cluster's next pass (their used figures NULL), in the same
        transaction: a job deleted around the cluster (by the admin, `kubectl delete` of an outside job, a
        test's hand) then frees its room as it would on Kubernetes. The cluster's own deletes stop a running
        job first (`SimulatedCluster.delete_job`), giving its room back exactly, and leave nothing to count."""
        with transaction.atomic(using=self.db, savepoint=False):
            lock_simulated_room(self.db)
            _uncount(_ran_on(self), self.db)
            return super().delete()

    delete.alters_data = True
    delete.queryset_only = True  # as QuerySet.delete: never `SimJob.objects.delete()`, which would delete them all

    def update(self, **kwargs):
        """Updates these jobs as `QuerySet.update` does; returns the rows changed. One that writes what room a
        job takes or where (`ROOM_FIELDS`: a running job moved, stopped or started by hand) leaves the nodes
        the running ones ran on before and run on after to be counted again, in the same transaction."""
        if not ROOM_FIELDS & kwargs.keys():
            return super().update(**kwargs)
        with transaction.atomic(using=self.db, savepoint=False):
            lock_simulated_room(self.db)
            pks = list(self.values_list("pk", flat=True))
            touched = type(self)(self.model, using=self.db).filter(pk__in=pks)
            before = _ran_on(touched)
            changed = super().update(**kwargs)
            _uncount(before | _ran_on(touched), self.db)
            return changed

    update.alters_data = True

    def bulk_update(self, objs, fields, batch_size=None):
        """`QuerySet.bulk_update`, leaving the nodes of the running jobs among `objs`, before and after, to be
        counted again when `fields` name what room a job takes or where (`update`)."""
        if not ROOM_FIELDS & set(fields):
            return super().bulk_update(objs, fields, batch_size=batch_size)
        objs = list(objs)
        with transaction.atomic(using=self.db, savepoint=False):
            lock_simulated_room(self.db)
            touched = type(self)(self.model, using=self.db).filter(pk__in=[obj.pk for obj in objs])
            before = _ran_on(touched)
            changed = super().bulk_update(objs, fields, batch_size=batch_size)
            _uncount(before | _ran_on(touched), self.db)
            return changed

    bulk_update.alters_data = True

    def bulk_create(self, objs, *args, **kwargs):
        """`QuerySet.bulk_create`, leaving the nodes the running jobs among `objs` run on to be counted again;
        with `update_conflicts` (an upsert), those the rows it may rewrite ran on before too."""
        objs = list(objs)
        with transaction.atomic(using=self.db, savepoint=False):
            lock_simulated_room(self.db)
            before: set[str] = set()
            if kwargs.get("update_conflicts"):  # a row of the same job id or pk is rewritten in place
                same = Q(job_id__in=[obj.job_id for obj in objs]) | Q(pk__in=[obj.pk for obj in objs if obj.pk])
                before = _ran_on(type(self)(self.model, using=self.db).filter(same))
            made = super().bulk_create(objs, *args, **kwargs)
            _uncount(before | {node for obj in objs if obj.started_at and not obj.finished_at
                               for node in obj.nodes or ()}, self.db)  # fmt: skip
            return made

    bulk_create.alters_data = True


class SimJob(models.Model):
    """A job as the simulated cluster holds it: created, suspended, running or ended."""

    objects = SimJobQuerySet.as_manager()

    job_id = models.BigIntegerField(unique=True)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=12)
    manifest = models.JSONField(default=dict)
    # What its replicas need, read from the manifest once, at create and resume: every pass of the cluster
    # reads every unfinished job, and parsing 2,000 manifests at each create and suspend of a cycle cost it
    # seconds. NULL on a row written without it (before this column; seed_demo's history), read then from
    # the manifest (`simulated_replicas`).
    replicas = models.JSONField(null=True, blank=True, help_text="Each replica group of the manifest: role, "
                                "count, what one replica needs (GPUs, CPU millicores, memory bytes) and its "
                                "required node affinity terms.")  # fmt: skip
    nodes = models.JSONField(default=list, help_text="Node of each replica once started; empty for a replica "
                             "whose pod waits for a node again.")
    # Of a running job, the replicas whose pods wait for a node again: their node was drained (`simulated.drain`)
    # and each pod, made again as the operator does, waits for room elsewhere; their entries in `nodes` are "".
    # Kept apart so that a pass finds such jobs by the database, as it finds those waiting to start.
    unplaced = models.PositiveIntegerField(default=0, db_default=0,
                                           help_text="Replicas of a running job whose pods wait for a node again.")
    # While a replica of a running job waits for a node again (`unplaced`), the rest of its gang waits for it at
    # their next collective, as a real distributed job does: its training stalls, from the cluster's first pass
    # that finds it short to the one that places its last replica again (`simulated.advance`), and neither ends
    # it nor saves a checkpoint meanwhile. Its run's stalls that ended are kept for its log's times.
    stalled_since = models.DateTimeField(null=True, blank=True, help_text="Running: since when its training has "
                                         "stalled, a replica of it waiting for a node again.")  # fmt: skip
    # NULL (none) on a row the code before it inserts.
    stalls = models.JSONField(default=list, null=True, blank=True, help_text="This run's stalls that ended: [seconds "
                              "of training when it stalled, seconds it stalled] each.")  # fmt: skip
    hint = models.JSONField(default=list, help_text="The node Gangway's plan chose for each replica.")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    duration = models.PositiveIntegerField(help_text="Seconds it runs once started.")
    # Its manifest's activeDeadlineSeconds (the job's max runtime): past it, counted in wall time from its latest
    # start, it fails as the operator fails it (`simulated.past_deadline`). NULL: none, and on a row the code
    # before it inserts.
    deadline = models.PositiveIntegerField(null=True, blank=True, help_text="Seconds it may run from its latest "
                                           "start (activeDeadlineSeconds) before it fails; empty: no limit.")  # fmt: skip
    fail = models.BooleanField(default=False)
    progress = models.FloatField(default=0, help_text="Seconds of work kept from earlier runs: up to the last "
                                 "checkpoint saved before each suspend.")
    suspended = models.BooleanField(default=False)
    finished_at = models.DateTimeField(null=True, blank=True)
    succeeded = models.BooleanField(null=True)
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["job_id"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="sim_job_unique_name")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def delete(self, using=None, keep_parents=False):
        """Deletes this job through `SimJobQuerySet.delete` (the admin deletes one object so), so that its
        nodes are counted again if it ran; returns what that returns."""
        return type(self).objects.using(using or self._state.db).filter(pk=self.pk).delete()

    delete.alters_data = True


class SimOutsideJob(models.Model):
    """A TFJob or PyTorchJob created in the simulated cluster by someone other than Gangway
    (`manage.py simulate_outside`): the object as kubectl, Katib or Pipelines wrote it, with
    the labels and patches Gangway put on it. Once admitted it also runs as a SimJob."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=36, unique=True)
    kind = models.CharField(max_length=12)
    manifest = models.JSONField(default=dict, help_text="The whole object: metadata (labels, annotations) and spec.")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="sim_outside_job_unique_name")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
