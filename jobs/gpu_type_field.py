"""The submit form's GPU type field: choices in order of preference, as numbered selects.

A multi-select cannot say an order, so the form shows one select per type the cluster
has ("1st choice", "2nd choice"...), each of the same name; a browser posts them in page
order, which is the preference order. Empty selects are dropped; which names are valid
is `parse_spec`'s and the submission service's call, as for every other field.
"""

from __future__ import annotations

from django import forms

ORDINALS = ("1st", "2nd", "3rd")


class PreferenceSelects(forms.Widget):
    """Reads every value posted under the field's name, in the order posted."""

    def value_from_datadict(self, data, files, name):
        values = data.getlist(name) if hasattr(data, "getlist") else data.get(name)
        if values is None:
            return []
        return [values] if isinstance(values, str) else list(values)

    def value_omitted_from_data(self, data, files, name):
        return False  # no select chosen is an answer too: the team's types


class GpuTypeField(forms.Field):
    """The GPU types chosen, in order, as a list of names ([] = the team's types, cheapest first)."""

    widget = PreferenceSelects

    def to_python(self, value) -> list[str]:
        return [str(item).strip() for item in value or [] if str(item).strip()]


def names_of(value) -> list[str]:
    """A spec's gpu_type as the field's list: one name or a list of names ([] for anything else,
    which the spec's check names once submitted)."""
    if isinstance(value, str):
        return [value] if value else []
    return [str(item) for item in value] if isinstance(value, list) else []


def ordinal(number: int) -> str:
    return ORDINALS[number - 1] if number <= len(ORDINALS) else f"{number}th"


def choice_rows(offers: list[tuple[str, str]], chosen: list[str]) -> list[dict]:
    """One select per offered type: its label, id and the name chosen in that place ("" for none).
    A chosen name the cluster does not offer (from an import or a resubmission) stays shown as
    asked, so the service's refusal is seen beside it rather than the choice vanishing."""
    count = max(len(offers), len(chosen))
    return [{"number": number, "label": f"{ordinal(number)} choice", "id": f"id_gpu_type_{number}",
             "value": chosen[number - 1] if number <= len(chosen) else ""}
            for number in range(1, count + 1)]  # fmt: skip
