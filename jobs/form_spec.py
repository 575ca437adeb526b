"""The job spec read from the submit form's fields: for a submission, and for the live fit preview."""

from __future__ import annotations

from jobs import kinds
from jobs.form_errors import add_spec_errors
from jobs.forms import JobForm
from jobs.spec import SpecError, parse_spec


def spec_data(form: JobForm, formset) -> dict:
    """The spec's JSON shape from whatever fields are valid (an invalid field is left out)."""
    form.is_valid(), formset.is_valid()
    cleaned = getattr(form, "cleaned_data", {})
    data = {key: cleaned[key] for key in ("team", "kind", "name", "image", "command", "args", "env", "tier") if key in cleaned}
    if cleaned.get("runtime"):
        data["runtime"] = cleaned["runtime"].strip()
    if cleaned.get("volumes"):
        data["volumes"] = cleaned["volumes"]
    if cleaned.get("shm"):
        data["shm"] = cleaned["shm"].strip()
    if cleaned.get("gpu_type"):
        data["gpu_type"] = cleaned["gpu_type"]
    data["max_runtime"] = cleaned.get("max_runtime")
    data["replicas"] = [
        {key: value for key, value in getattr(replica, "cleaned_data", {}).items() if value not in ("", None)}
        for replica in formset.forms
    ]
    return data


def validate(form: JobForm, formset):
    """The validated spec (through parse_spec) or None, with every problem put by its field.

    The spec is checked even when some fields are invalid, so one post shows
    every problem; a field that already has an error gets no second one.
    """
    data = spec_data(form, formset)
    team = form.selected_team.slug if form.selected_team else None
    try:
        spec = parse_spec(data, team=team)
    except SpecError as error:
        add_spec_errors(form, formset, error.errors, skip_existing=True)
        return None
    if form.errors or not formset.is_valid():
        return None
    return spec


def preview_spec(form: JobForm, formset) -> tuple[object | None, str]:
    """A spec good enough to preview the fit while the form is still being filled, or (None, what is missing).

    Only team, kind, tier, runtime and replicas matter to the fit, so a missing
    name or image does not hold the preview back.
    """
    if form.selected_team is None:
        return None, "Join a team to submit jobs."
    if not formset.is_valid():
        return None, "Fill in the replica groups to see where the job would stand."
    form.is_valid()
    cleaned = form.cleaned_data
    data = {
        "team": form.selected_team.slug, "name": "preview", "image": "preview", "kind": cleaned.get("kind") or kinds.default().name,
        "tier": cleaned.get("tier") or "", "max_runtime": cleaned.get("max_runtime"),
        "replicas": [{k: v for k, v in f.cleaned_data.items() if v not in ("", None)} for f in formset.forms],
        "shm": (cleaned.get("shm") or "").strip() or None, "runtime": (cleaned.get("runtime") or "").strip() or None,
        "gpu_type": cleaned.get("gpu_type") or None,
    }  # fmt: skip
    try:
        return parse_spec(data, team=form.selected_team.slug), ""
    except SpecError as error:
        path, messages = next(iter(error.errors.items()))
        return None, f"{path}: {messages[0]}"
