"""The submit form: ordinary Django forms in front of the one job spec.

The form only turns fields into the spec's JSON shape; every rule lives in
`parse_spec` and the submission service, whose errors are put back by the
fields they name. Beside it: the spec read from the fields (`form_spec.py`),
those errors put by the fields (`form_errors.py`), and the initial values of
an import or a resubmission (`form_initial.py`).
"""

from __future__ import annotations

import re
import shlex
import uuid

from django import forms

from jobs import kinds
from jobs.gpu_type_field import GpuTypeField, choice_rows
from tenants.inputs import MAX_GPU_PER_REPLICA, MAX_REPLICAS, MAX_RUNTIME
from tenants.models import DNS_LABEL, PriorityTier, Team
from tenants.selectors import gpu_types


def html_pattern(regex: str) -> str:
    """The spec's rule as an HTML pattern (anchored already; a leading '-' in a class escaped, as the
    browsers' v-flag patterns require), so the page can tell when a field's error is fixed."""
    return regex.removeprefix("^").removesuffix("$").replace("[-", "[\\-")


def new_submission() -> str:
    """A new form's submission key (see `submission_key`): the form shown, or filled by an import."""
    return uuid.uuid4().hex


class JobForm(forms.Form):
    # One value per form shown, sent back with it: a second post of the same form (a double
    # click, a retried request) finds the job the first made instead of making another.
    submission = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput, initial=new_submission)
    team = forms.ChoiceField()
    kind = forms.ChoiceField(choices=kinds.choices, initial=lambda: kinds.default().name)
    name = forms.CharField(max_length=50, help_text="Lowercase letters, digits and '-'.",
                           widget=forms.TextInput(attrs={"placeholder": "resnet50-baseline", "autocomplete": "off",
                                                         "pattern": html_pattern(DNS_LABEL)}))  # fmt: skip
    image = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"placeholder": "tensorflow/tensorflow:2.12.0-gpu"}))
    runtime = forms.CharField(required=False, max_length=253,
                              widget=forms.TextInput(attrs={"placeholder": "torch-distributed", "autocomplete": "off"}))
    # Text areas, not inputs: a browser strips the line breaks of an input's value, and a word may hold
    # some (a script given to `bash -c`), quoted as a shell would.
    command = forms.CharField(required=False, help_text="Run as is, never through a shell.",
                              widget=forms.Textarea(attrs={"rows": 1, "placeholder": "python /app/train.py"}))
    args = forms.CharField(required=False, help_text="Words as a shell splits them: quote one holding spaces or line breaks.",
                           widget=forms.Textarea(attrs={"rows": 1, "placeholder": "--epochs 90"}))  # fmt: skip
    tier = forms.ChoiceField(required=False)
    # Minutes, as the field always read a bare number, or a duration to the second: an import or a
    # resubmission of 90 s must stay 90 s, not become 2 minutes.
    max_runtime = forms.CharField(
        required=False, max_length=40, label="Max runtime",
        help_text="Minutes, or a duration such as 90 s or 1 h 30 min; stopped after this, also used for estimates.",
        widget=forms.TextInput(attrs={"placeholder": "minutes", "autocomplete": "off"}),
    )
    env = forms.CharField(required=False, label="Environment",
                          help_text="One NAME=value per line; a value of several lines as NAME<<END, its lines, then END.",
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

    def clean_max_runtime(self) -> int | None:
        """The max runtime in seconds (None when empty), within the spec's range (MAX_RUNTIME), which is
        said here in the words it was typed in: the spec's own sentence counts seconds, as the API takes them."""
        text = self.cleaned_data["max_runtime"].strip()
        if not text:
            return None
        if text.isascii() and text.isdigit():
            seconds, typed = int(text) * 60, f"{text} min"
        else:
            parts = DURATION.fullmatch(text)
            if parts is None or not any(parts.groupdict().values()):
                raise forms.ValidationError("Write minutes, or a duration such as 90 s or 1 h 30 min.")
            seconds = sum(int(parts[unit] or 0) * size for unit, size in (("h", 3600), ("min", 60), ("s", 1)))
            typed = text
        if not 1 <= seconds <= MAX_RUNTIME:
            raise forms.ValidationError(f"Must be from 1 s to {MAX_RUNTIME // 3600} h ({MAX_RUNTIME // 86400} days), "
                                        f"got {typed}.")  # fmt: skip
        return seconds

    def clean_command(self):
        return _words(self.cleaned_data["command"])

    def clean_args(self):
        return _words(self.cleaned_data["args"])

    def clean_env(self):
        """NAME: value of each NAME=value line, and of each NAME<<END, the value's lines as they are
        (their spaces kept), then END: how `form_initial` writes a value of several lines."""
        env = {}
        lines = _lines(self.cleaned_data["env"])
        number = 0
        while number < len(lines):
            line = lines[number]
            number += 1
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            heredoc = None if sep else HEREDOC.fullmatch(line)
            if heredoc is None and not sep:
                raise forms.ValidationError(f"Line {number} has no '=': write NAME=value, or NAME<<END, the "
                                            "value's lines, then END.")  # fmt: skip
            if heredoc is None:
                env[name.strip()] = value.strip()
                continue
            closing = next((at for at in range(number, len(lines)) if lines[at].strip() == heredoc["end"]), None)
            if closing is None:
                raise forms.ValidationError(f"Line {number}: {line.strip()} is never closed by a line "
                                            f"{heredoc['end']}.")  # fmt: skip
            env[heredoc["name"]] = "\n".join(lines[number:closing])
            number = closing + 1
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


# A max runtime to the second: "90 s", "1 h 30 min", "2h 5min 10s".
DURATION = re.compile(r"(?:(?P<h>\d{1,9})\s*h\s*)?(?:(?P<min>\d{1,9})\s*min\s*)?(?:(?P<s>\d{1,9})\s*s)?")

# A value of several lines in the environment field: NAME<<END, its lines, then END.
HEREDOC = re.compile(r"\s*(?P<name>[^\s<=]+)<<(?P<end>\S+)\s*")


def _lines(text: str) -> list[str]:
    """The lines of a text area's value: a browser sends its line breaks as CRLF."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _words(text: str) -> list[str]:
    try:
        return shlex.split("\n".join(_lines(text)))
    except ValueError as error:
        raise forms.ValidationError(f"Could not split into words: {error} (check the quotes).") from None


class ReplicaForm(forms.Form):
    role = forms.ChoiceField(choices=lambda: [(role, role) for role in kinds.all_roles()], initial="Worker")
    count = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, initial=1, widget=forms.NumberInput(attrs={"class": "num"}))
    gpu = forms.IntegerField(min_value=0, max_value=MAX_GPU_PER_REPLICA, initial=1, label="GPUs",
                             widget=forms.NumberInput(attrs={"class": "num"}))
    cpu = forms.CharField(required=False, label="CPU", widget=forms.TextInput(attrs={"placeholder": "default"}))
    memory = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": "default"}))

    def has_changed(self) -> bool:
        """Always true: every row posted is a replica group, whatever its values.

        Django reads a row past the formset's initial forms whose values equal the fields'
        initial ones as an empty extra form and leaves it out: a row "+ Add replica group"
        adds (Worker, 1 replica, 1 GPU) and left as it came lost its GPU, and a lone such
        row was refused with "Please submit at least 1 form.". A row cleared of its values
        is still a row, whose empty fields are marked required; "×" removes a row.
        """
        return True


def replica_formset(*args, **kwargs) -> forms.BaseFormSet:
    """The replica rows: at most one group per role of the kind with the most (read from the registry now).

    absolute_max caps how many forms a post may make Django build: without it,
    replicas-TOTAL_FORMS=100000 built 1,005 forms (seconds of CPU) before saying no.
    """
    most = kinds.most_groups()
    formset = forms.formset_factory(ReplicaForm, extra=0, min_num=1, validate_min=True, max_num=most,
                                    absolute_max=most, validate_max=True)  # fmt: skip
    return formset(*args, prefix="replicas", **kwargs)


def submission_key(form: JobForm, digest: str) -> str:
    """The idempotency key of the form's submission of the spec of `digest` ("" when the form
    carried none): the same form posted twice with the same values makes one job; sent back
    with other values (back, edit, submit), another."""
    value = form.cleaned_data.get("submission") or ""
    return f"form:{value}:{digest}" if re.fullmatch(r"[0-9a-f]{32}", value) else ""


def bind(data, *, teams: list[Team], offers=None) -> tuple[JobForm, forms.BaseFormSet]:
    return JobForm(data, teams=teams, offers=offers), replica_formset(data)
