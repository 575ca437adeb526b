"""The kustomize base under deploy/kubernetes, read as objects (rendered by kubectl when it is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

BASE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def source_objects(folder: Path = BASE) -> list[dict]:
    """Returns every object of the files the kustomization (or component) in `folder` lists, as written."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return [
        obj
        for resource in kustomization["resources"]
        for obj in yaml.safe_load_all((folder / resource).read_text())
        if obj
    ]


def rendered_objects(folder: Path = BASE) -> list[dict] | None:
    """Returns the objects `kubectl kustomize` renders from `folder`, or None when kubectl is not installed."""
    if not shutil.which("kubectl"):
        return None
    output = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, check=True,
                            timeout=60)  # fmt: skip
    return [obj for obj in yaml.safe_load_all(output.stdout) if obj]


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}
