"""The kustomize base under deploy/kubernetes, read as objects (rendered by kubectl when it is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

BASE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def source_objects() -> list[dict]:
    """Returns every object of the files the kustomization lists, as written."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [
        obj
        for resource in kustomization["resources"]
        for obj in yaml.safe_load_all((BASE / resource).read_text())
        if obj
    ]


def rendered_objects() -> list[dict] | None:
    """Returns the objects `kubectl kustomize` renders, or None when kubectl is not installed."""
    if not shutil.which("kubectl"):
        return None
    output = subprocess.run(["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, check=True, timeout=60)
    return [obj for obj in yaml.safe_load_all(output.stdout) if obj]


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}
