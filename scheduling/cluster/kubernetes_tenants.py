"""Keep the cluster in line with Gangway's tenants, and say what is wrong with it.

`sync` is level-triggered: for each object it reads what exists, compares
the fields Gangway manages with `manifests`, and creates, updates or (for
immutable fields) recreates only what differs. A second run changes nothing.
Objects of teams or tiers that are gone are left alone: deleting a
namespace would delete the team's jobs and checkpoints, so that stays an
admin's decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from core.quantities import memory_text
from jobs import kinds
from scheduling.cluster import manifests, node_types
from scheduling.cluster.base import ClusterError, ClusterUnavailable, Finding, NodeInfo, SyncIncomplete, Tenants
from scheduling.cluster.kubernetes_api import CONFLICT, NOT_FOUND, Api, same_quantities

LABELS = ("metadata", "labels")


@dataclass(frozen=True)
class Endpoint:
    """How to read, create, replace and delete one kind of object, and which fields Gangway owns."""

    kind: str
    read: Callable  # (name)
    create: Callable  # (body)
    replace: Callable  # (name, body)
    delete: Callable  # (name)
    managed: tuple[tuple[str, ...], ...]
    immutable: tuple[tuple[str, ...], ...] = ()


def _endpoints(api: Api, namespace: str | None = None) -> dict[str, Endpoint]:
    core, scheduling, custom = api.core, api.scheduling, api.custom
    queue = (manifests.VOLCANO_GROUP, manifests.VOLCANO_VERSION, "queues")
    return {
        "Namespace": Endpoint(
            "Namespace", core.read_namespace, core.create_namespace, core.replace_namespace,
            core.delete_namespace, managed=(LABELS,),
        ),
        "ResourceQuota": Endpoint(
            "ResourceQuota",
            lambda name, **kw: core.read_namespaced_resource_quota(name, namespace, **kw),
            partial(core.create_namespaced_resource_quota, namespace),
            lambda name, body, **kw: core.replace_namespaced_resource_quota(name, namespace, body, **kw),
            lambda name, **kw: core.delete_namespaced_resource_quota(name, namespace, **kw),
            managed=(LABELS, ("spec", "hard")),
        ),
        "LimitRange": Endpoint(
            "LimitRange",
            lambda name, **kw: core.read_namespaced_limit_range(name, namespace, **kw),
            partial(core.create_namespaced_limit_range, namespace),
            lambda name, body, **kw: core.replace_namespaced_limit_range(name, namespace, body, **kw),
            lambda name, **kw: core.delete_namespaced_limit_range(name, namespace, **kw),
            managed=(LABELS, ("spec", "limits")),
        ),
        "PriorityClass": Endpoint(
            "PriorityClass", scheduling.read_priority_class, scheduling.create_priority_class,
            scheduling.replace_priority_class, scheduling.delete_priority_class,
            managed=(LABELS, ("description",), ("globalDefault",)),
            # The API server refuses to change these; the class is recreated.
            immutable=(("value",), ("preemptionPolicy",)),
        ),
        "Queue": Endpoint(
            "Queue",
            partial(custom.get_cluster_custom_object, *queue),
            partial(custom.create_cluster_custom_object, *queue),
            partial(custom.replace_cluster_custom_object, *queue),
            partial(custom.delete_cluster_custom_object, *queue),
            managed=(LABELS, ("spec", "weight"), ("spec", "reclaimable"),
                     ("spec", "deserved"), ("spec", "capability")),
        ),
    }


def desired_objects(tenants: Tenants) -> list[dict]:
    """Returns every object the tenants need: priority classes first, then each team's objects."""
    objects = [manifests.priority_class(tier) for tier in tenants.tiers]
    for team in tenants.teams:
        objects += [
            manifests.namespace(team),
            manifests.resource_quota(team),
            manifests.limit_range(team),
            manifests.volcano_queue(team),
        ]
    return objects


def sync(api: Api, tenants: Tenants) -> list[str]:
    """Returns one line per object created, updated or recreated; empty when nothing differed.

    An object the cluster refuses (a namespace being deleted, a quota a webhook rejects) does
    not stop the others: every object is tried, a team's namespaced objects left out when its
    namespace was refused, and SyncIncomplete then says what was changed and what was refused.
    ClusterUnavailable stops the sync at once."""
    changes, failures, refused_namespaces = [], [], set()
    for obj in desired_objects(tenants):
        namespace = obj["metadata"].get("namespace")
        if namespace in refused_namespaces:
            failures.append(f"{obj['kind']} {namespace}/{obj['metadata']['name']}: left out, as its namespace was refused")
            continue
        endpoint = _endpoints(api, namespace)[obj["kind"]]
        try:
            change = converge(api, endpoint, obj)
        except ClusterUnavailable:
            raise
        except ClusterError as error:
            failures.append(str(error))
            if obj["kind"] == "Namespace":
                refused_namespaces.add(obj["metadata"]["name"])
            continue
        if change:
            changes.append(change)
    if failures:
        raise SyncIncomplete(changes, failures)
    return changes


def converge(api: Api, endpoint: Endpoint, desired: dict, attempts: int = 3) -> str | None:
    """Makes one object match `desired` in the fields Gangway manages.

    Returns a line saying what changed, or None when it already matched.
    A write that loses a race with another writer (409) is retried from a
    fresh read, at most `attempts` times.
    """
    meta = desired["metadata"]
    name = meta["name"]
    where = f"{meta['namespace']}/{name}" if meta.get("namespace") else name
    label = f"{endpoint.kind} {where}"
    for _ in range(attempts):
        actual = api.call("read", endpoint.kind, where, endpoint.read, name, tolerate=(NOT_FOUND,))
        if actual is None:
            if api.call("create", endpoint.kind, where, endpoint.create, desired, tolerate=(CONFLICT,)) is None:
                continue  # created by someone else meanwhile: compare again
            return f"Created {label}."
        drift = [path for path in endpoint.managed + endpoint.immutable if _differs(desired, actual, path)]
        if not drift:
            return None
        fields = ", ".join(".".join(path) for path in drift)
        if any(path in endpoint.immutable for path in drift):
            api.call("delete", endpoint.kind, where, endpoint.delete, name, tolerate=(NOT_FOUND,))
            if api.call("create", endpoint.kind, where, endpoint.create, desired, tolerate=(CONFLICT,)) is None:
                continue
            return f"Recreated {label} ({fields} cannot change in place)."
        body = _with_managed(actual, desired, drift)
        if api.call("update", endpoint.kind, where, endpoint.replace, name, body, tolerate=(CONFLICT,)) is None:
            continue  # stale resourceVersion: read again
        return f"Updated {label} ({fields})."
    raise ClusterError(f"update {label}: still conflicting with another writer after {attempts} attempts")


def _get(obj: dict, path: tuple[str, ...]):
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj or None  # an empty map or list reads as absent, as the server may drop it


def _differs(desired: dict, actual: dict, path: tuple[str, ...]) -> bool:
    want, have = _get(desired, path), _get(actual, path)
    if path == LABELS:  # others may add labels; ours must be there
        return any((have or {}).get(key) != value for key, value in (want or {}).items())
    return not same_quantities(want, have)


def _with_managed(actual: dict, desired: dict, paths: list[tuple[str, ...]]) -> dict:
    """Returns `actual` (resourceVersion included) with the managed fields taken from `desired`."""
    body = {**actual}
    for path in paths:
        *parents, last = path
        node = body
        for key in parents:
            node[key] = dict(node.get(key) or {})
            node = node[key]
        want = _get(desired, path)
        if path == LABELS:
            node[last] = {**(node.get(last) or {}), **want}
        elif want is None:
            node.pop(last, None)
        else:
            node[last] = want
    return body


# -- doctor -------------------------------------------------------------------

VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")


def required_crds() -> dict[str, str]:
    """Returns every CustomResourceDefinition Gangway needs, with what installs it: each job kind's, then Volcano's."""
    needed = {crd: kind.operator for kind in kinds.all_kinds() for crd in kind.crds}
    return {**needed, **dict.fromkeys(VOLCANO_CRDS, "Volcano")}
# The label the Volcano Helm chart and installer YAML put on the scheduler's pods.
VOLCANO_SCHEDULER_SELECTOR = "app=volcano-scheduler"


def doctor(api: Api, tenants: Tenants, raw_nodes: list[dict], nodes: list[NodeInfo]) -> list[Finding]:
    """Returns the problems found, each with its fix; empty when Gangway can work on this cluster."""
    findings = []
    crds = api.list_all(
        "CustomResourceDefinition", "*", api.extensions.list_custom_resource_definition, tolerate=(NOT_FOUND,),
    )
    present = {crd["metadata"]["name"] for crd in crds or ()}
    findings += _crd_findings(present)
    findings += _runtime_findings(api, present)
    schedulers = api.list_all(
        "Pod", "*", api.core.list_pod_for_all_namespaces, label_selector=VOLCANO_SCHEDULER_SELECTOR,
    )
    if not any((pod.get("status") or {}).get("phase") == "Running" for pod in schedulers):
        findings.append(Finding(
            f"No running Volcano scheduler pod ({VOLCANO_SCHEDULER_SELECTOR}) was found in any namespace, "
            "so gang-scheduled pods would stay Pending.",
            "Install Volcano (its Helm chart runs the scheduler) or find out why its scheduler pod is not running.",
        ))
    findings += _gpu_findings(raw_nodes, nodes)
    findings += node_types.type_findings(nodes, tenants)
    findings += _quota_findings(tenants, nodes)
    findings += _namespace_findings(api, tenants)
    return findings


def _namespace_findings(api: Api, tenants: Tenants) -> list[Finding]:
    """Returns a note per team whose namespace does not exist yet: the tenant sync makes it (a first
    install runs doctor before sync_tenants, and beat syncs a new team within minutes), so a note."""
    return [Finding(
        f"Team {team.slug} has no namespace {team.slug} yet, so its jobs cannot be created until the tenant "
        "sync makes it.",
        "Run manage.py sync_tenants (beat runs it every 5 minutes); it makes each team's namespace, quota, "
        "limit range and Volcano queue.", blocking=False,
    ) for team in tenants.teams
        if api.call("read", "Namespace", team.slug, api.core.read_namespace, team.slug, tolerate=(NOT_FOUND,)) is None]


def _crd_findings(present: set[str]) -> list[Finding]:
    """Returns a finding per missing CustomResourceDefinition: Volcano's always block; a job kind's
    block only when no kind has all of its CRDs, since a cluster may run some kinds and not others
    (the Training Operator without Kubeflow Trainer v2, say), and then only that kind's jobs fail."""
    usable = [kind for kind in kinds.all_kinds() if set(kind.crds) <= present]
    findings = []
    for kind in kinds.all_kinds():
        for crd in kind.crds:
            if crd in present:
                continue
            if usable:
                findings.append(Finding(
                    f"The CustomResourceDefinition {crd} is missing, so {kind.name} jobs cannot run on this cluster "
                    f"(the cluster runs {', '.join(other.name for other in usable)}).",
                    f"Install {kind.operator} on the cluster before anyone submits a {kind.name}.", blocking=False,
                ))  # fmt: skip
            else:
                findings.append(Finding(
                    f"The CustomResourceDefinition {crd} is missing, so Gangway cannot create what it needs.",
                    f"Install {kind.operator} on the cluster.",
                ))
    for crd in VOLCANO_CRDS:
        if crd not in present:
            findings.append(Finding(
                f"The CustomResourceDefinition {crd} is missing, so Gangway cannot create what it needs.",
                "Install Volcano on the cluster.",
            ))
    return findings


def _runtime_findings(api: Api, present: set[str]) -> list[Finding]:
    """Returns a finding for each runtime (a ClusterTrainingRuntime) whose jobs Volcano would not gang-schedule.

    A runtime without its kind's gang field (`spec.podGroupPolicy.volcano`) starts its jobs'
    pods one by one, which is what Gangway exists to prevent. Kinds whose CRDs are missing
    are reported as such, not here.
    """
    findings = []
    for kind in kinds.all_kinds():
        if not kind.runtime_plural or not set(kind.crds) <= present:
            continue
        runtimes = api.list_all(
            kind.runtime_kind, "*", api.custom.list_cluster_custom_object,
            kind.group, kind.version, kind.runtime_plural,
        )
        for runtime in runtimes:
            value: object = runtime
            for key in kind.runtime_gang:
                value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                name = runtime["metadata"]["name"]
                findings.append(Finding(
                    f"{kind.runtime_kind} {name} has no {'.'.join(kind.runtime_gang)}, so the pods of a {kind.name} "
                    "on it are not gang-scheduled by Volcano.",
                    f"Add {'.'.join(kind.runtime_gang[1:])}: {{}} to {kind.runtime_kind} {name}, or run no "
                    f"{kind.name} on it.",
                ))  # fmt: skip
    return findings


def _gpu_findings(raw_nodes: list[dict], nodes: list[NodeInfo]) -> list[Finding]:
    if not raw_nodes:
        return [Finding("The cluster has no nodes.", "Add nodes to the cluster.")]
    if not nodes:
        return [Finding(
            f"None of the {len(raw_nodes)} nodes accepts pods: all are cordoned or tainted NoSchedule/NoExecute.",
            "Uncordon the nodes or remove the taints Gangway's pods do not tolerate.",
        )]
    without = [node.name for node in nodes if node.gpu == 0]
    if len(without) == len(nodes):
        return [Finding(
            "No schedulable node reports nvidia.com/gpu, so no GPU job can ever start.",
            "Install the NVIDIA device plugin (or the GPU Operator) on the GPU nodes.",
        )]
    if without:
        # A note: most clusters have CPU-only nodes (Volcano, Gangway and the rest of the platform run
        # there), and GPU jobs start on the others. Only the admin knows whether these have GPUs.
        return [Finding(
            f"{len(without)} of {len(nodes)} schedulable nodes report no nvidia.com/gpu: {', '.join(without)}.",
            "If they have GPUs, install the NVIDIA device plugin there; CPU-only nodes can stay as they are.",
            blocking=False,
        )]
    return []


def _quota_findings(tenants: Tenants, nodes: list[NodeInfo]) -> list[Finding]:
    findings = []
    for team in tenants.teams:
        limits = (
            (team.per_replica_max, "per-pod maximum"),
            (manifests.quota_ceiling(team), "quota (nominal + borrowing limit)"),
        )
        for resource, default in sorted(team.default_request.items()):
            for limit, why in ((bound.get(resource), why) for bound, why in limits):
                if resource != "gpu" and limit is not None and default > limit:
                    findings.append(Finding(
                        f"Team {team.slug}'s LimitRange default of {_show(resource, default)} per container "
                        f"is more than its {why} of {_show(resource, limit)}, so a pod relying on the "
                        "default is never admitted.",
                        f"Lower team {team.slug}'s default {resource} request or raise its limit.",
                    ))
                    break
    capacity = {r: sum(getattr(node, r) for node in nodes) for r in ("gpu", "cpu", "memory")}
    for resource, total in capacity.items():
        nominal = sum(team.nominal.get(resource, 0) for team in tenants.teams)
        if nominal > total:
            findings.append(Finding(
                f"Nominal {resource} quotas add up to {_show(resource, nominal)} but the schedulable nodes "
                f"have {_show(resource, total)}, so not every team can get its guaranteed share.",
                f"Lower the nominal {resource} quotas or add nodes.",
            ))
    return findings


def _show(resource: str, value: int) -> str:
    """Returns an amount with its unit: "8 GPUs", "2.5 CPUs", "16 GiB"."""
    if resource == "gpu":
        return f"{value} GPU" + ("" if value == 1 else "s")
    if resource == "cpu":
        return f"{value / 1000:g} CPU" + ("" if value == 1000 else "s")
    return memory_text(value)
