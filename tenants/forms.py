"""The staff quota editor (nominal, borrowing and lending per resource, and the team's weight) and the token form.

GPUs are whole cards; CPU and memory are Kubernetes quantities ("64", "500m",
"512Gi") stored as millicores and bytes. On a cluster with GPU types the editor
has a GPU row per type (`gpu:a100`, "a100 GPUs") in place of the one `gpu` row.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from core.quantities import IN_UNITS, NotFinite, TooLarge, format_cpu, format_memory
from tenants.inputs import WEIGHT_MAX, WEIGHT_MIN, quota_problem
from tenants.limit_words import UNSET
from scheduling.policy.types import type_of_key
from tenants.models import Team, base_resource
from tenants.quota_conflicts import QuotaAsRead
from tenants.selectors import gpu_types, quota_resources
from tenants.tokens import LIFETIMES, TOKEN_NAME, lifetime_problem

LIMITS = ("nominal", "borrowing_limit", "lending_limit")
LABELS = {"gpu": "GPUs", "cpu": "CPU", "memory": "Memory"}
COLUMNS = {"nominal": "nominal", "borrowing_limit": "borrowing limit", "lending_limit": "lending limit"}
UNITS = {"gpu": "whole cards", "cpu": "cores, or millicores as 500m", "memory": "bytes, e.g. 512Gi"}
SHOW = {"gpu": str, "cpu": format_cpu, "memory": format_memory}


def field_name(resource: str, limit: str) -> str:
    """The form field of one limit of a quota resource: "gpu-a100_nominal" (no ":" in HTML ids)."""
    return f"{resource.replace(':', '-')}_{limit}"


class QuotaForm(forms.Form):
    """One row of nominal, borrowing and lending limits per resource the team's quota may name now
    (`quota_resources()`), and the team's weight; `based_on`, hidden, holds the figures the page was
    loaded with (`QuotaAsRead.token`), so a save from a page opened before another admin's change is
    refused instead of undoing it."""

    weight = forms.FloatField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX,
                              help_text="Share weight when teams compete for borrowable GPUs.",
                              widget=forms.NumberInput(attrs={"step": "0.1", "class": "num"}))
    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resources = quota_resources()
        self.described = {t.resource: t.description for t in gpu_types()}
        for resource in self.resources:
            for limit in LIMITS:
                self.fields[field_name(resource, limit)] = forms.CharField(
                    required=False, widget=forms.TextInput(attrs={"class": "num", "placeholder": UNSET[limit]})
                )

    def rows(self):
        """(resource label, unit, [bound fields]) per resource, for the table: "a100 GPUs" for a GPU type,
        whose unit line says what the type offers."""
        return [(label_of(resource), self._unit(resource), [self[field_name(resource, limit)] for limit in LIMITS])
                for resource in self.resources]  # fmt: skip

    def _unit(self, resource: str) -> str:
        unit = UNITS[base_resource(resource)]
        return f"{unit} · {self.described[resource]}" if self.described.get(resource) else unit

    def clean(self):
        cleaned = super().clean()
        for resource in self.resources:
            for limit in LIMITS:
                key = field_name(resource, limit)
                try:
                    cleaned[key] = _amount(resource, cleaned.get(key, ""))
                except ValueError as error:
                    self.add_error(key, str(error))
            nominal = field_name(resource, "nominal")
            if nominal not in self.errors and cleaned.get(nominal) is None and any(  # empty, not refused
                    cleaned.get(field_name(resource, limit)) for limit in LIMITS[1:]):
                self.add_error(field_name(resource, "nominal"), "Set a nominal quota before borrowing or lending limits.")
        return cleaned

    def named_errors(self) -> list[str]:
        """Each field's errors, after the name of the field they are about and without their last full stop
        ("Weight: ...", "a100 GPUs nominal: ..."), for the preview, which is swapped in without the table that marks the fields."""
        names = {"weight": "Weight"} | {field_name(resource, limit): f"{label_of(resource)} {COLUMNS[limit]}"
                                         for resource in self.resources for limit in LIMITS}  # fmt: skip
        return [f"{names.get(field, field)}: {' '.join(errors).rstrip('.')}" for field, errors in self.errors.items()]

    def clean_based_on(self) -> QuotaAsRead | None:
        """What the page was loaded with; None when the post does not say (the view refuses to save it)."""
        return QuotaAsRead.parse(self.cleaned_data.get("based_on"))

    def quotas(self) -> dict[str, dict | None]:
        """{resource: {nominal, borrowing_limit, lending_limit}} or None for a resource with no quota."""
        data = self.cleaned_data
        return {
            resource: None if data[field_name(resource, "nominal")] is None
            else {limit: data[field_name(resource, limit)] for limit in LIMITS}
            for resource in self.resources
        }


def label_of(resource: str) -> str:
    """How the quota page names a resource: "GPUs", "a100 GPUs", "CPU", "Memory"."""
    gpu_type = type_of_key(resource)
    return f"{gpu_type} GPUs" if gpu_type is not None else LABELS[resource]


def _amount(resource: str, text: str) -> int | None:
    """The stored amount of `text` (None when blank); ValueError with a sentence when it is not one."""
    resource = base_resource(resource)  # a GPU type's quota is counted in whole cards like any GPU's
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = IN_UNITS[resource](text)
    except NotFinite:
        raise ValueError(f"Must be an amount, not {text!r} (e.g. 8, 500m, 512Gi).") from None
    except TooLarge:
        raise ValueError(f"Too large an amount: {text!r}.") from None
    except ValueError:
        raise ValueError(f"Not a quantity: {text!r} (e.g. 8, 500m, 512Gi).") from None
    if value < 0 or value != value.to_integral_value():
        raise ValueError(f"Must be a whole, non-negative amount, got {text!r}.")
    if resource == "gpu" and "".join(c for c in text if not c.isdigit()):
        raise ValueError(f"GPUs are whole cards, got {text!r}.")
    problem = quota_problem(resource, int(value))
    if problem:
        raise ValueError(problem.replace(f"got {int(value)!r}", f"got {text!r}"))
    return int(value)


def initial_for(values: dict, read: QuotaAsRead | None = None) -> dict:
    """Form initial values from `quota_values(team)`, for the resources the quota may name now, and
    `read` (those values as read now) for the hidden `based_on`."""
    initial = {"weight": values.get("weight", 1.0), "based_on": read.token() if read else ""}
    for resource in quota_resources():
        row = values.get(resource) or {}
        show = SHOW[base_resource(resource)]
        for limit in LIMITS:
            amount = row.get(limit)
            initial[field_name(resource, limit)] = "" if amount is None else show(amount) if amount else "0"
    return initial


class TokenForm(forms.Form):
    """A new API token: its name and, for a team token, the highest tier it may submit to."""

    name = forms.CharField(
        max_length=100, help_text="What it is for, e.g. ci-main. Letters, digits, . @ + - and single spaces.",
        validators=[RegexValidator(TOKEN_NAME, "Use letters, digits, . @ + - and single spaces, e.g. ci-main.")],
        widget=forms.TextInput(attrs={"placeholder": "ci-main", "autocomplete": "off"}),
    )  # fmt: skip
    max_tier = forms.ModelChoiceField(
        queryset=None, required=False, label="Highest tier", empty_label="Any tier the team may use",
        help_text="Jobs it submits may not ask for a higher tier.",
    )  # fmt: skip

    lifetime = forms.TypedChoiceField(
        label="Expires after", coerce=int, empty_value=None, initial=90, required=False,
        help_text="From then on it no longer authenticates, and whatever uses it gets 401 saying so.",
    )  # fmt: skip

    def __init__(self, *args, team: Team | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if team is None:
            del self.fields["max_tier"]  # a user token acts as its user, with the user's tiers
        else:
            self.fields["max_tier"].queryset = team.tiers.order_by("-value", "name")
        lifetime = self.fields["lifetime"]
        offered = [(days, label) for days, label in LIFETIMES if not lifetime_problem(days)]
        if not offered:  # TOKEN_MAX_LIFETIME shorter than a week: its own days
            offered = [(settings.TOKEN_MAX_LIFETIME, f"{settings.TOKEN_MAX_LIFETIME} days")]
        lifetime.choices = [("" if days is None else days, label) for days, label in offered]
        if all(days != lifetime.initial for days, _ in offered):
            lifetime.initial = offered[-1][0]  # the longest allowed

    def clean_lifetime(self) -> int | None:
        days = self.cleaned_data["lifetime"]
        if problem := lifetime_problem(days):
            raise forms.ValidationError(problem)
        return days
