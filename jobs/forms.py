"""The submit form: ordinary Django forms in front of the one job spec.

The form only turns fields into the spec's JSON shape; every rule lives in
`parse_spec` and the submission service, whose errors are put back by the
fields they name.
"""

from __future__ import annotations

import math
import re
import shlex

from django import forms

from jobs import kinds
from jobs.models import Job
from core.quantities import format_cpu, format_memory
from jobs.gpu_type_field import GpuTypeField, choice_rows, names_of
from jobs.spec import SpecError, parse_spec
from scheduling.policy.reasons import Code
from tenants.inputs import MAX_GPU_PER_REPLICA, MAX_REPLICAS, MAX_RUNTIME
from tenants.models import DNS_LABEL, PriorityTier, Team
from tenants.selectors import gpu_types

MAX_RUNTIME_MINUTES = MAX_RUNTIME // 60
# "replicas[2].gpu" -> ("replicas", 2, "gpu"); "command[0]" -> ("command", 0, None); "env.X" -> ("env", None, "X")
ERROR_PATH = re.compile(r"^(?P<field>[a-z_]+)(?:\[(?P<index>\d+)\])?(?:\.(?P<sub>.+))?$")


def html_pattern(regex: str) -> str:
    """The spec's rule as an HTML pattern (anchored already; a leading '-' in a class escaped, as the
    browsers' v-flag patterns require), so the page can tell when a field's error is fixed."""
    return regex.removeprefix("^").removesuffix("$").replace("[-", "[\\-")


class JobForm(forms.Form):
    team = forms.ChoiceField()
    kind = forms.ChoiceField(choices=kinds.choices, initial=lambda: kinds.default().name)
    name = forms.CharField(max_length=50, help_text="Lowercase letters, digits and '-'.",
                           widget=forms.TextInput(attrs={"placeholder": "resnet50-baseline", "autocomplete": "off",
                                                         "pattern": html_pattern(DNS_LABEL)}))  # fmt: skip
    image = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"placeholder": "tensorflow/tensorflow:2.12.0-gpu"}))
    runtime = forms.CharField(required=False, max_length=253,
                              widget=forms.TextInput(attrs={"placeholder": "torch-distributed", "autocomplete": "off"}))
    command = forms.CharField(required=False, help_text="Run as is, never through a shell.",
                              widget=forms.TextInput(attrs={"placeholder": "python /app/train.py"}))
    args = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": "--epochs 90"}))
    tier = forms.ChoiceField(required=False)
    max_runtime = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_RUNTIME_MINUTES, label="Max runtime (min)",
        help_text="Stopped after this; also used for estimates.",
    )
    env = forms.CharField(required=False, label="Environment", help_text="One NAME=value per line.",
                          widget=forms.Textarea(attrs={"rows": 3, "placeholder": "DATASET=imagenet"}))
    volumes = forms.CharField(
        required=False, label="Volumes",
        help_text="One per line: claim NAME PATH [ro], or configmap NAME PATH; the team's own claims and config maps.",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "claim datasets /data ro\nconfigmap train-config /etc/train"}),
    )  # fmt: skip
    shm = forms.CharField(required=False, label="Shared memory (/dev/shm)",
                          help_text="Memory-backed, added to each replica's memory, e.g. 16Gi.",
                          widget=forms.TextInput(attrs={"placeholder": "default", "autocomplete": "off"}))  # fmt: skip
    gpu_type = GpuTypeField(required=False, label="GPU type",
                            help_text="The first choice where the job fits now wins; leave the 1st choice empty for "
                                      "the team's types, cheapest first.")  # fmt: skip

    def __init__(self, *args, teams: list[Team], offers=None, **kwargs):
        """`offers(team)`, when given, returns what each GPU type offers the team now, as objects with a
        `name` and a `summary` (the scheduling app's figures); without it, each type is shown with its
        description alone."""
        super().__init__(*args, **kwargs)
        self.teams = {team.slug: team for team in teams}
        self.fields["kind"].help_text = "Roles: " + "; ".join(
            f"{kind.name} {', '.join(kind.role_names)}" for kind in kinds.all_kinds()
        )
        self.fields["runtime"].help_text = "; ".join(
            f"A {kind.name} runs on this {kind.runtime_kind}" for kind in kinds.all_kinds() if kind.runtime_kind
        ) + "; other kinds leave it empty."
        self.fields["team"].choices = [(team.slug, f"{team.slug} — {team.name}") for team in teams]
        self.selected_team = self.teams.get(self.data.get("team") or self.initial.get("team") or "") or (teams[0] if teams else None)
        tiers: list[PriorityTier] = list(self.selected_team.tiers.all()) if self.selected_team else []
        default = self.selected_team.default_tier if self.selected_team and self.selected_team.default_tier_id else None
        label = f"Team default ({default.name})" if default else "Team default"
        choices = [("", label)] + [
            (tier.name, f"{tier.name}{'' if tier.preemptible else ' (not preemptible)'}") for tier in tiers
        ]
        asked = self.data.get("tier") if self.is_bound else self.initial.get("tier")
        if isinstance(asked, str) and asked and asked not in {tier.name for tier in tiers}:
            # A tier the team may not use (from an import or a resubmission) stays shown as asked, never
            # silently replaced by the default: the submission service refuses it by the field, as the API does.
            choices.append((asked, f"{asked} (not allowed for this team)"))
        self.fields["tier"].choices = choices
        self.replica_errors: list[str] = []
        if self.selected_team is None:  # in no team, nothing to submit: no types to offer either
            self.gpu_offers = []
        elif offers is not None:
            self.gpu_offers = [(offer.name, offer.summary) for offer in offers(self.selected_team)]
        else:
            self.gpu_offers = [(t.name, f"{t.name} — {t.description}" if t.description else t.name) for t in gpu_types()]

    @property
    def gpu_offers_names(self) -> set[str]:
        return {name for name, _ in self.gpu_offers}

    def gpu_type_rows(self) -> list[dict]:
        """The numbered selects of the GPU type field with the name chosen in each (see gpu_type_field)."""
        chosen = self["gpu_type"].value() if self.is_bound else self.initial.get("gpu_type")
        return choice_rows(self.gpu_offers, GpuTypeField().to_python(chosen))

    def clean_command(self):
        return _words(self.cleaned_data["command"])

    def clean_args(self):
        return _words(self.cleaned_data["args"])

    def clean_env(self):
        env = {}
        for number, line in enumerate(self.cleaned_data["env"].splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"Line {number} has no '=': write NAME=value.")
            env[name.strip()] = value.strip()
        return env

    def clean_volumes(self):
        """The lines as the spec's volumes; what each holds is checked by `parse_spec`."""
        volumes = []
        for number, line in enumerate(self.cleaned_data["volumes"].splitlines(), start=1):
            words = line.split()
            if not words:
                continue
            if words[0] == "claim" and len(words) in (3, 4) and words[3:] in ([], ["ro"], ["rw"]):
                volumes.append({"claim": words[1], "path": words[2], "read_only": words[3:] == ["ro"]})
            elif words[0] == "configmap" and len(words) == 3:
                volumes.append({"config_map": words[1], "path": words[2]})
            else:
                raise forms.ValidationError(
                    f"Line {number}: write claim NAME PATH (add ro for read-only) or configmap NAME PATH."
                )
        return volumes


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as error:
        raise forms.ValidationError(f"Could not split into words: {error} (check the quotes).") from None


class ReplicaForm(forms.Form):
    role = forms.ChoiceField(choices=lambda: [(role, role) for role in kinds.all_roles()], initial="Worker")
    count = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, initial=1, widget=forms.NumberInput(attrs={"class": "num"}))
    gpu = forms.IntegerField(min_value=0, max_value=MAX_GPU_PER_REPLICA, initial=1, label="GPUs",
                             widget=forms.NumberInput(attrs={"class": "num"}))
    cpu = forms.CharField(required=False, label="CPU", widget=forms.TextInput(attrs={"placeholder": "default"}))
    memory = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": "default"}))


def replica_formset(*args, **kwargs) -> forms.BaseFormSet:
    """The replica rows: at most one group per role of the kind with the most (read from the registry now).

    absolute_max caps how many forms a post may make Django build: without it,
    replicas-TOTAL_FORMS=100000 built 1,005 forms (seconds of CPU) before saying no.
    """
    most = kinds.most_groups()
    formset = forms.formset_factory(ReplicaForm, extra=0, min_num=1, validate_min=True, max_num=most,
                                    absolute_max=most, validate_max=True)  # fmt: skip
    return formset(*args, prefix="replicas", **kwargs)


def bind(data, *, teams: list[Team], offers=None) -> tuple[JobForm, forms.BaseFormSet]:
    return JobForm(data, teams=teams, offers=offers), replica_formset(data)


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
    minutes = cleaned.get("max_runtime")
    data["max_runtime"] = minutes * 60 if minutes else None
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


def add_spec_errors(form: JobForm, formset, errors: dict[str, list[str]], *, skip_existing: bool = False) -> None:
    """Put the spec's {path: [messages]} errors by the form fields they name.

    With `skip_existing`, a field that already has an error (so was left out of
    the spec) gets none from the spec.
    """
    for path, messages in errors.items():
        match = ERROR_PATH.match(path)
        field, index, sub = (match["field"], match["index"], match["sub"]) if match else (None, None, None)
        if skip_existing and _has_error(form, formset, field, index, sub):
            continue
        for message in messages:
            if field == "replicas":
                if index is not None and int(index) < len(formset.forms) and sub in ReplicaForm.base_fields:
                    formset.forms[int(index)].add_error(sub, message)
                else:
                    form.replica_errors.append(message if index is None else f"Group {int(index) + 1}: {message}")
            elif field == "volumes" and index is not None:
                form.add_error(field, f"Line {int(index) + 1}: {message}")
            elif field in form.fields:
                word = "Choice" if field == "gpu_type" else "Word"
                prefix = f"{sub}: " if sub else (f"{word} {int(index) + 1}: " if index is not None else "")
                form.add_error(field, prefix + message)
            else:
                form.add_error(None, f"{path}: {message}" if path != "non_field_errors" else message)


# A job that can never run (R10) for its tier alone is fixed in the tier field; every
# other refusal is about the replica groups' sizes.
FIT_ERROR_ON_TIER = {Code.ABOVE_NOMINAL_STEADY}
REPLICA_SIZE_FIELDS = ("count", "gpu", "cpu", "memory")


def add_fit_error(form: JobForm, formset, code: str, reason: str) -> None:
    """Put the policy's refusal ("Can never run: ...") by the field behind it: the tier, or the replica groups."""
    message = f"Can never run: {reason}"
    if code in FIT_ERROR_ON_TIER:
        form.add_error("tier", message)
    else:
        form.replica_errors.append(message)
        form.fit_on_replicas = True


def mark_invalid(form: JobForm, formset) -> None:
    """Every field with an error gets aria-invalid and aria-describedby naming its error (by id)."""
    for bound in [*form, *(field for row in formset.forms for field in row)]:
        if bound.errors:
            bound.field.widget.attrs.update({"aria-invalid": "true", "aria-describedby": f"error-{bound.html_name}"})
    if getattr(form, "fit_on_replicas", False) or form.replica_errors:
        for row in formset.forms:
            for name in REPLICA_SIZE_FIELDS:
                attrs = row.fields[name].widget.attrs
                if "aria-invalid" not in attrs:
                    attrs.update({"aria-invalid": "true", "aria-describedby": "replica-errors"})


def _has_error(form: JobForm, formset, field, index, sub) -> bool:
    if field == "replicas":
        if index is None or int(index) >= len(formset.forms):
            return bool(formset.non_form_errors()) or not formset.management_form.is_valid()
        replica = formset.forms[int(index)]
        return bool(replica.errors) if sub is None else sub in replica.errors
    return field in form.errors


def error_count(form: JobForm, formset) -> int:
    count = sum(len(errors) for errors in form.errors.values()) + len(form.replica_errors)
    count += sum(len(errors) for f in formset.forms for errors in f.errors.values()) + len(formset.non_form_errors())
    return count


def initial_from_data(data: dict) -> tuple[dict, list[dict]]:
    """Initial values of the form and its replica rows from spec data (an import or a resubmission)."""
    seconds = data.get("max_runtime")
    initial = {
        "team": data.get("team") or "",
        "kind": data.get("kind") or kinds.default().name,
        "name": data.get("name") or "",
        "image": data.get("image") or "",
        "command": _join(data.get("command")),
        "args": _join(data.get("args")),
        "tier": data.get("tier") or "",
        "max_runtime": math.ceil(seconds / 60) if isinstance(seconds, int) and seconds > 0 else None,
        "env": "\n".join(f"{k}={v}" for k, v in (data.get("env") or {}).items()) if isinstance(data.get("env"), dict) else "",
        "volumes": "\n".join(_volume_line(v) for v in data.get("volumes") or [] if isinstance(v, dict))
        if isinstance(data.get("volumes"), list) else "",
        "shm": str(data.get("shm") or ""),
        "runtime": data.get("runtime") or "",
        "gpu_type": names_of(data.get("gpu_type")),
    }
    rows = []
    for group in _groups(data):
        if isinstance(group, dict):
            rows.append({"role": group.get("role", "Worker"), "count": group.get("count", 1), "gpu": group.get("gpu", 0),
                         "cpu": _quantity(group.get("cpu"), format_cpu), "memory": _quantity(group.get("memory"), format_memory)})
    return initial, rows or [{"role": "Worker", "count": 1, "gpu": 1}]


def _groups(data: dict) -> list:
    """The replica groups of spec data: its replicas, or one group of a kind of nodes' num_nodes and resources_per_node."""
    kind = kinds.find(data.get("kind"))
    if kind is None or not kind.nodes or ("num_nodes" not in data and "resources_per_node" not in data):
        return data.get("replicas") or []
    resources = data.get("resources_per_node") if isinstance(data.get("resources_per_node"), dict) else {}
    return [{**resources, "role": kind.roles[0].name, "count": data.get("num_nodes", 1)}]


def bound_data(initial: dict, rows: list[dict]) -> dict:
    """What a post of the form filled with `initial` and `rows` would send (to check an import as a submission)."""
    data = {key: value if isinstance(value, list) else "" if value is None else str(value)
            for key, value in initial.items()}  # fmt: skip
    data.update({"replicas-TOTAL_FORMS": str(len(rows)), "replicas-INITIAL_FORMS": "0"})
    for index, row in enumerate(rows):
        data.update({f"replicas-{index}-{key}": "" if value is None else str(value) for key, value in row.items()})
    return data


def initial_from_job(job: Job) -> tuple[dict, list[dict]]:
    """A resubmission's initial values: the job's spec, with the same team and tier.

    A replica's stored memory includes the /dev/shm; the form asks for the rest, as the submitter did.
    """
    replicas = [
        {**group, "memory": group["memory"] - job.shm} if job.shm and group.get("memory", 0) > job.shm else group
        for group in job.replicas
    ]
    data = {
        "team": job.team.slug, "kind": job.kind, "name": job.name, "image": job.image, "command": job.command,
        "args": job.args, "env": job.env, "tier": job.tier.name, "max_runtime": job.max_runtime,
        "replicas": replicas, "volumes": job.volumes, "shm": format_memory(job.shm) if job.shm else "",
        "runtime": job.runtime, "gpu_type": job.gpu_type,
    }  # fmt: skip
    return initial_from_data(data)


def _volume_line(volume: dict) -> str:
    """A volume as the form writes it: "claim datasets /data ro" or "configmap train-config /etc/train"."""
    if "config_map" in volume:
        return f"configmap {volume['config_map']} {volume.get('path', '')}"
    return f"claim {volume.get('claim', '')} {volume.get('path', '')}" + (" ro" if volume.get("read_only") else "")


def _join(words) -> str:
    if isinstance(words, list):
        return shlex.join(str(word) for word in words)
    return str(words or "")


def _quantity(value, formatter) -> str:
    if isinstance(value, int):
        return formatter(value) if value else ""
    return str(value or "")


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
    minutes = cleaned.get("max_runtime")
    data = {
        "team": form.selected_team.slug, "name": "preview", "image": "preview", "kind": cleaned.get("kind") or kinds.default().name,
        "tier": cleaned.get("tier") or "", "max_runtime": minutes * 60 if minutes else None,
        "replicas": [{k: v for k, v in f.cleaned_data.items() if v not in ("", None)} for f in formset.forms],
        "shm": (cleaned.get("shm") or "").strip() or None, "runtime": (cleaned.get("runtime") or "").strip() or None,
        "gpu_type": cleaned.get("gpu_type") or None,
    }  # fmt: skip
    try:
        return parse_spec(data, team=form.selected_team.slug), ""
    except SpecError as error:
        path, messages = next(iter(error.errors.items()))
        return None, f"{path}: {messages[0]}"
