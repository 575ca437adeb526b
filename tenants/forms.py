"""The staff quota editor: nominal, borrowing and lending per resource, and the team's weight.

GPUs are whole cards; CPU and memory are Kubernetes quantities ("64", "500m",
"512Gi") stored as millicores and bytes.
"""

from __future__ import annotations

from decimal import InvalidOperation

from django import forms
from kubernetes.utils.quantity import parse_quantity

from jobs.spec import format_cpu, format_memory
from tenants.models import Resource

LIMITS = ("nominal", "borrowing_limit", "lending_limit")
LABELS = {"gpu": "GPUs", "cpu": "CPU", "memory": "Memory"}
UNITS = {"gpu": "whole cards", "cpu": "cores, or millicores as 500m", "memory": "bytes, e.g. 512Gi"}
SCALE = {"gpu": 1, "cpu": 1000, "memory": 1}
SHOW = {"gpu": str, "cpu": format_cpu, "memory": format_memory}


class QuotaForm(forms.Form):
    weight = forms.FloatField(min_value=0.01, help_text="Share weight when teams compete for borrowable GPUs.",
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
        value = parse_quantity(text) * SCALE[resource]
    except (ValueError, TypeError, InvalidOperation):
        raise ValueError(f"Not a quantity: {text!r} (e.g. 8, 500m, 512Gi).") from None
    if value < 0 or value != value.to_integral_value():
        raise ValueError(f"Must be a whole, non-negative amount, got {text!r}.")
    if resource == "gpu" and "".join(c for c in text if not c.isdigit()):
        raise ValueError(f"GPUs are whole cards, got {text!r}.")
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
