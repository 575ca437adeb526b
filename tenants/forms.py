"""The staff quota editor (nominal, borrowing and lending per resource, and the team's weight) and the token form.

GPUs are whole cards; CPU and memory are Kubernetes quantities ("64", "500m",
"512Gi") stored as millicores and bytes.
"""

from __future__ import annotations

from django import forms
from django.core.validators import RegexValidator

from core.quantities import IN_UNITS, NotFinite, format_cpu, format_memory
from tenants.inputs import WEIGHT_MAX, WEIGHT_MIN, quota_problem
from tenants.models import Resource, Team
from tenants.tokens import TOKEN_NAME

LIMITS = ("nominal", "borrowing_limit", "lending_limit")
LABELS = {"gpu": "GPUs", "cpu": "CPU", "memory": "Memory"}
UNITS = {"gpu": "whole cards", "cpu": "cores, or millicores as 500m", "memory": "bytes, e.g. 512Gi"}
SHOW = {"gpu": str, "cpu": format_cpu, "memory": format_memory}


class QuotaForm(forms.Form):
    weight = forms.FloatField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX,
                              help_text="Share weight when teams compete for borrowable GPUs.",
                              widget=forms.NumberInput(attrs={"step": "0.1", "class": "num"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for resource in Resource.values:
            for limit in LIMITS:
                self.fields[f"{resource}_{limit}"] = forms.CharField(
                    required=False, widget=forms.TextInput(attrs={"class": "num", "placeholder": _placeholder(limit)})
                )

    def rows(self):
        """(resource label, unit, [bound fields]) per resource, for the table."""
        return [
            (LABELS[resource], UNITS[resource], [self[f"{resource}_{limit}"] for limit in LIMITS])
            for resource in Resource.values
        ]

    def clean(self):
        cleaned = super().clean()
        for resource in Resource.values:
            for limit in LIMITS:
                key = f"{resource}_{limit}"
                try:
                    cleaned[key] = _amount(resource, cleaned.get(key, ""))
                except ValueError as error:
                    self.add_error(key, str(error))
            if cleaned.get(f"{resource}_nominal") is None and any(cleaned.get(f"{resource}_{l}") for l in LIMITS[1:]):
                self.add_error(f"{resource}_nominal", "Set a nominal quota before borrowing or lending limits.")
        return cleaned

    def quotas(self) -> dict[str, dict | None]:
        """{resource: {nominal, borrowing_limit, lending_limit}} or None for a resource with no quota."""
        data = self.cleaned_data
        return {
            resource: None if data[f"{resource}_nominal"] is None
            else {limit: data[f"{resource}_{limit}"] for limit in LIMITS}
            for resource in Resource.values
        }


def _placeholder(limit: str) -> str:
    return {"nominal": "no quota", "borrowing_limit": "no limit", "lending_limit": "all unused"}[limit]


def _amount(resource: str, text: str) -> int | None:
    """The stored amount of `text` (None when blank); ValueError with a sentence when it is not one."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = IN_UNITS[resource](text)
    except NotFinite:
        raise ValueError(f"Must be an amount, not {text!r} (e.g. 8, 500m, 512Gi).") from None
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


def initial_for(values: dict) -> dict:
    """Form initial values from `quota_values(team)`."""
    initial = {"weight": values.get("weight", 1.0)}
    for resource in Resource.values:
        row = values.get(resource) or {}
        for limit in LIMITS:
            amount = row.get(limit)
            initial[f"{resource}_{limit}"] = "" if amount is None else SHOW[resource](amount) if amount else "0"
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

    def __init__(self, *args, team: Team | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if team is None:
            del self.fields["max_tier"]  # a user token acts as its user, with the user's tiers
        else:
            self.fields["max_tier"].queryset = team.tiers.order_by("-value", "name")
