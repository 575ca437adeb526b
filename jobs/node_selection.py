"""A manifest's node selection read as the GPU types a job accepts (read by `jobs.pod_template`).

A pod template pins a GPU model with a `nodeSelector` on the model's node label, or
with a required node affinity whose expression is `In` on that label. Gangway pins
the type itself once admission chooses one, so it reads these as the spec's
`gpu_type`: each label value maps to the GpuType with that label and value, and the
values of an `In` list become a preference list in the order written. Everything
else under `nodeSelector` and `affinity` is listed back as unsupported; on a cluster
without GPU types, both fields are listed whole.
"""

from __future__ import annotations

from tenants.selectors import gpu_types

NODE_SELECTION = {"nodeSelector", "affinity"}  # the pod spec fields read here
NO_TYPE = "no GPU type has the value"  # how a value of a type's label that no type has is listed back
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def pod_gpu_types(pod: dict, where: str, unsupported: list[str]) -> list[str]:
    """The GPU types the pod spec at `where` (a path such as spec.tfReplicaSpecs.Worker.template.spec)
    selects, in order of preference; [] when it selects none. Adds to `unsupported` every part of
    its nodeSelector and affinity that is not a GPU type's label. Reads the cluster's GPU types
    only for a pod that selects nodes."""
    if not NODE_SELECTION & set(pod):
        return []
    labels = {(t.label, t.value): t.name for t in gpu_types()}
    if not labels:  # a cluster without types reads no node selection, as before types existed
        unsupported.extend(f"{where}.{key}" for key in pod if key in NODE_SELECTION)
        return []
    keys = {label for label, _ in labels}
    chosen = _from_selector(pod.get("nodeSelector"), f"{where}.nodeSelector", labels, keys, unsupported)
    preferred = _from_affinity(pod.get("affinity"), f"{where}.affinity", labels, keys, unsupported)
    if chosen and preferred:  # both must hold: the types either allows, in the affinity's order
        both = [name for name in preferred if name in chosen]
        if not both:
            unsupported.append(f"{where}.nodeSelector (selects {', '.join(chosen)}, which its affinity does not "
                               f"allow; the affinity's {', '.join(preferred)} was read)")  # fmt: skip
        return both or preferred
    return preferred or chosen


def _from_selector(selector, where: str, labels: dict, keys: set, unsupported: list[str]) -> list[str]:
    """The type a nodeSelector names by its label; every other entry is listed."""
    if selector is None:
        return []
    if not isinstance(selector, dict):
        unsupported.append(f"{where} (must be a mapping of label: value)")
        return []
    names = []
    for key, value in selector.items():
        name = labels.get((key, value)) if isinstance(value, str) else None
        if name is not None:
            names.append(name)
        elif key in keys:
            unsupported.append(f"{where}.{key} ({NO_TYPE} {value!r})")
        else:
            unsupported.append(f"{where}.{key}")
    return names


def _from_affinity(affinity, where: str, labels: dict, keys: set, unsupported: list[str]) -> list[str]:
    """The types a required node affinity's `In` expression on a type's label lists, in its order;
    preferred terms, pod (anti-)affinity, several terms and other expressions are listed."""
    if affinity is None:
        return []
    if not isinstance(affinity, dict):
        unsupported.append(f"{where} (must be a mapping)")
        return []
    unsupported.extend(f"{where}.{key}" for key in affinity if key != "nodeAffinity")
    node = affinity.get("nodeAffinity")
    if node is None:
        return []
    if not isinstance(node, dict):
        unsupported.append(f"{where}.nodeAffinity (must be a mapping)")
        return []
    unsupported.extend(f"{where}.nodeAffinity.{key}" for key in node if key != REQUIRED)
    where = f"{where}.nodeAffinity.{REQUIRED}"
    required = node.get(REQUIRED)
    if required is None:
        return []
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], dict):
        unsupported.append(f"{where} (only one nodeSelectorTerm with matchExpressions on a GPU type's label)")
        return []
    where = f"{where}.nodeSelectorTerms[0]"
    unsupported.extend(f"{where}.{key}" for key in terms[0] if key != "matchExpressions")
    expressions = terms[0].get("matchExpressions") or []
    if not isinstance(expressions, list):
        unsupported.append(f"{where}.matchExpressions (must be a list)")
        return []
    names: list[str] = []
    for index, expression in enumerate(expressions):
        path = f"{where}.matchExpressions[{index}]"
        if not (isinstance(expression, dict) and expression.get("key") in keys and expression.get("operator") == "In"
                and isinstance(expression.get("values"), list)):
            unsupported.append(path)
            continue
        for number, value in enumerate(expression["values"]):
            name = labels.get((expression["key"], value)) if isinstance(value, str) else None
            if name is None:
                unsupported.append(f"{path}.values[{number}] ({NO_TYPE} {value!r})")
            elif name not in names:
                names.append(name)
    return names
