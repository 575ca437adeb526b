"""What each replica of a simulated job needs, kept on its row (`SimJob.replicas`) so the cluster never
parses a manifest to run a pass.

Every create, suspend and status read of the simulated cluster places or counts every unfinished job's
replicas: reading them from 2,000 stored manifests at each of a cycle's creates and suspends cost that
cycle 20 s of CPU (docs/loop-bench.md). They are read from the manifest once, when the job is created
or resumed, in the shape below, and each pass reads those few numbers.
"""

from __future__ import annotations

from core.quantities import cpu_millicores, memory_bytes, parse_quantity
from scheduling.cluster import job_manifests
from scheduling.models import SimJob

Need = tuple[int, int, int]  # (GPUs, CPU millicores, memory bytes) of one replica


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
