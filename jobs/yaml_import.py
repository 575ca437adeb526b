"""Reading a job from YAML: Gangway's own spec, or a manifest of a registered job kind.

A manifest is turned into the job spec by the reader of its kind's layout
(`replica_specs_import.py`, `trainjob_import.py`, over the pod template's parts in
`pod_template.py`), and every field Gangway does not carry over is listed back (never
silently dropped). The YAML is parsed safely by `safe_yaml.load_yaml`.
"""

from __future__ import annotations

from jobs import kinds
from jobs.replica_specs_import import spec_from_replica_specs
from jobs.safe_yaml import load_yaml
from jobs.spec import SpecError
from jobs.trainjob_import import spec_from_trainjob


def is_manifest(data: object) -> bool:
    """Whether `data` is a manifest of a registered kind (an apiVersion and a kind), rather than Gangway's spec."""
    return isinstance(data, dict) and kinds.find(data.get("kind")) is not None and "apiVersion" in data


def unregistered_kind_problem(data: object) -> str | None:
    """The sentence refusing a manifest (a mapping with an apiVersion) of no registered kind, or None for
    anything else: Gangway's spec has no apiVersion, so such a mapping could only be misread as one."""
    if not isinstance(data, dict) or "apiVersion" not in data or kinds.find(data.get("kind")) is not None:
        return None
    kind = data.get("kind")
    takes = [f"{kind.api_version} {kind.name}" for kind in kinds.all_kinds()]
    takes = " or ".join(filter(None, (", ".join(takes[:-1]), takes[-1])))
    if kind in (None, ""):
        got = f"{data['apiVersion']} manifest without a kind"
        return f"{_article(got)} {got} is not a job Gangway runs; it takes a {takes} manifest, or a Gangway job spec."
    got = f"{data['apiVersion']} {kind}"
    return f"{_article(got)} {got} is not a job kind Gangway runs; it takes a {takes} manifest, or a Gangway job spec."


def _article(word: str) -> str:
    return "An" if word[:1].lower() in "aeiou" else "A"


def spec_from_yaml(text: str) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from Gangway's spec or a manifest of a registered kind.

    Raises SpecError for a manifest of any other kind, which would otherwise be read as a spec of none of
    its fields."""
    data = load_yaml(text)
    if problem := unregistered_kind_problem(data):
        raise SpecError({"yaml": [problem]})
    if is_manifest(data):
        return spec_from_manifest(data)
    return data, []


def spec_from_manifest(manifest: dict) -> tuple[dict, list[str]]:
    """(spec data, unsupported fields) from a manifest of a registered kind, read as its layout is shaped."""
    kind = kinds.get(manifest["kind"])
    api_version = manifest.get("apiVersion")
    if api_version != kind.api_version:
        raise SpecError({"apiVersion": [f"A {kind.name} is {kind.api_version}, got {api_version!r}."]})
    return READERS[kind.layout](kind, manifest)


# How each layout's manifests are read; a kind of a layout listed here needs nothing more than its registry entry.
READERS = {
    kinds.Layout.REPLICA_SPECS: spec_from_replica_specs,
    kinds.Layout.TRAINER: spec_from_trainjob,
}
