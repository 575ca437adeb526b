"""What each replica of a simulated job needs, kept on its row (`SimJob.replicas`) so the cluster never
parses a manifest to run a pass, and what the running replicas take of each node (`SimNode.gpu_used`,
`cpu_used`, `memory_used`), so a pass never sums them over every running job.

Reading the replicas from 2,000 stored manifests at each of a cycle's creates and suspends cost that
cycle 20 s of CPU, and summing them over the 2,000 running jobs to find the room left still cost it 7 s
(docs/loop-bench.md). The replicas are read from the manifest once, when the job is created or resumed,
in the shape below; what they take is added to their nodes when the job starts and taken off when it
ends, is suspended or deleted, in the transaction that starts or stops it, under
`models.lock_simulated_room`.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import BigIntegerField, F, Value

from core.quantities import cpu_millicores, memory_bytes, parse_quantity
from scheduling.cluster import job_manifests
from scheduling.models import SimJob, SimNode, lock_simulated_room

Need = tuple[int, int, int]  # (GPUs, CPU millicores, memory bytes) of one replica
Room = list[int]  # [GPUs, CPU millicores, memory bytes] left on a node, or taken there
USED = ("gpu_used", "cpu_used", "memory_used")  # SimNode's figures of what its running jobs take, as Room


def from_manifest(manifest: dict) -> list[dict]:
    """Returns each replica group of a built manifest, in its order: {"role", "count", "need": [GPUs, CPU
    millicores, memory bytes] of one replica (its container limits), "terms": its required node affinity
    terms, [] when any node will do}."""
    terms = job_manifests.replica_terms(manifest)
    return [
        {"role": role, "count": count, "terms": group_terms,
         "need": [int(parse_quantity(limits.get("nvidia.com/gpu", 0))), int(cpu_millicores(limits.get("cpu", 0))),
                  int(memory_bytes(limits.get("memory", 0)))]}
        for (role, count, limits), group_terms in zip(job_manifests.replica_needs(manifest), terms)
    ]  # fmt: skip


def groups(job: SimJob) -> list[dict]:
    """Returns the job's replica groups (`from_manifest`'s shape): as stored on its row, or read from its
    manifest for a row written without them (`SimJob.replicas` is NULL)."""
    return job.replicas if job.replicas is not None else from_manifest(job.manifest)


def needs(job: SimJob) -> list[Need]:
    """Returns what each replica needs, one entry per replica, in the manifest's order."""
    return needs_of(groups(job))


def needs_of(stored: list[dict]) -> list[Need]:
    """Returns what each replica of these groups (`SimJob.replicas`, as read) needs, one entry per replica."""
    result: list[Need] = []
    for group in stored:
        gpu, cpu, memory = group["need"]
        result.extend([(gpu, cpu, memory)] * group["count"])
    return result


def terms(job: SimJob) -> list[list[dict]]:
    """Returns the required node affinity terms of each replica, in `needs`' order ([]: any node)."""
    return [group["terms"] for group in groups(job) for _ in range(group["count"])]


def names(job: SimJob) -> list[str]:
    """Returns "worker-0", "worker-1", ... for every replica, in the manifest's order."""
    return [f"{group['role'].lower()}-{index}" for group in groups(job) for index in range(group["count"])]


def taken(running: Iterable[tuple[list[str], list[dict]]]) -> dict[str, Room]:
    """Returns what the replicas of these jobs take on each node, summed: each job as its nodes (one per
    replica, in order; "" for a replica whose pod waits for a node, which takes nothing) and its replica groups
    (`SimJob.replicas`, as read)."""
    result: dict[str, Room] = {}
    for nodes, stored in running:
        for node, need in zip(nodes, needs_of(stored)):
            if not node:
                continue
            room = result.setdefault(node, [0, 0, 0])
            for index, amount in enumerate(need):
                room[index] += amount
    return result


def taken_by(job: SimJob) -> dict[str, Room]:
    """Returns what a running job takes on each of its nodes (its replicas read from its manifest for a row
    written without them)."""
    return taken([(job.nodes, groups(job))])


def count_uncounted() -> None:
    """Counts what runs on each node not counted yet (its used figures NULL: added since, or left unsure by a
    delete from outside the cluster) from every running job; returns nothing. The one pass over them all,
    made only when such a node exists. The caller holds `lock_simulated_room`."""
    uncounted = list(SimNode.objects.filter(gpu_used__isnull=True).order_by("name").only("name"))
    if not uncounted:
        return
    counted = running_taken()
    for node in uncounted:
        node.gpu_used, node.cpu_used, node.memory_used = counted.get(node.name, [0, 0, 0])
    SimNode.objects.bulk_update(uncounted, list(USED), batch_size=500)


def running_taken() -> dict[str, Room]:
    """Returns what every running job takes on each node, summed afresh from their rows: what the nodes' kept
    figures must be (`count_uncounted` counts them so; `invariants.kept_room_drift` checks them against it)."""
    running = SimJob.objects.filter(started_at__isnull=False, finished_at__isnull=True)
    stored = list(running.filter(replicas__isnull=False).values_list("nodes", "replicas"))
    legacy = [(job.nodes, groups(job)) for job in running.filter(replicas__isnull=True).only("nodes", "manifest")]
    return taken(stored + legacy)


def kept_room_drift() -> list[str]:
    """Returns a sentence for each simulated node whose kept figures (`USED`) are not what its running jobs take
    there, summed afresh (`running_taken`): a write that went around both the cluster's path and
    `SimJobQuerySet` (a `save` of a running job's nodes or times by hand), which would otherwise go unseen,
    placing jobs on room that is not there or leaving room unused. A node not counted yet is left out; [] when
    every figure holds, and on a cluster without simulated nodes. `invariants.check` and the simulated
    cluster's `doctor` report them. Both are read under the cluster's lock, in one transaction, so that a pass
    ending a job between the two reads is not taken for drift."""
    with transaction.atomic():
        lock_simulated_room()
        kept = {name: figures for name, *figures in
                SimNode.objects.filter(gpu_used__isnull=False).order_by("name").values_list("name", *USED)}
        if not kept:
            return []
        summed = running_taken()
    problems = []
    for name, (gpu, cpu, memory) in kept.items():
        runs = summed.get(name, [0, 0, 0])
        if [gpu, cpu, memory] != runs:
            problems.append(f"simulated node {name} keeps {gpu} GPUs, {cpu} millicores and {memory} bytes as taken "
                            f"by its running jobs, which take {runs[0]} GPUs, {runs[1]} millicores and {runs[2]} bytes")
    return problems


def take(placed: dict[str, Room]) -> None:
    """Adds what jobs that start take to their nodes (`taken`); returns nothing. Node by node in name order;
    one that is gone is left gone, one not counted yet stays so."""
    _add(placed, 1)


def give_back(freed: dict[str, Room]) -> None:
    """Takes what jobs that stop took off their nodes (`taken`), as `take` adds it; returns nothing."""
    _add(freed, -1)


def _add(amounts: dict[str, Room], sign: int) -> None:
    for name in sorted(amounts):
        if any(amounts[name]):
            changes = {field: F(field) + _big(sign * amount) for field, amount in zip(USED, amounts[name])}
            SimNode.objects.filter(name=name).update(**changes)


def _big(amount: int) -> Value:
    """`amount` as a 64-bit SQL value: Django sends a bare int in an expression as a 32-bit integer on
    PostgreSQL, which wrapped 4 GiB of memory round to 0."""
    return Value(amount, output_field=BigIntegerField())


def room(smallest: Need) -> tuple[dict[str, Room], dict[str, dict[str, str]]]:
    """Returns the room left on each schedulable node with room for `smallest` (the least, in each figure,
    that a replica to place needs: a node with less can take none of them, so it is not read), and those
    nodes' labels. Nodes are counted first (`count_uncounted`)."""
    least_gpu, least_cpu, least_memory = smallest
    nodes = SimNode.objects.filter(schedulable=True, gpu__gte=F("gpu_used") + _big(least_gpu),
                                   cpu__gte=F("cpu_used") + _big(least_cpu),
                                   memory__gte=F("memory_used") + _big(least_memory))  # fmt: skip
    free, labels = {}, {}
    for name, gpu, cpu, memory, gpu_used, cpu_used, memory_used, node_labels in nodes.values_list(
            "name", "gpu", "cpu", "memory", *USED, "labels"):  # fmt: skip
        free[name] = [gpu - gpu_used, cpu - cpu_used, memory - memory_used]
        labels[name] = {str(k): str(v) for k, v in (node_labels or {}).items()}
    return free, labels
