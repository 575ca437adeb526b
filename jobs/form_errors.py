"""The submit form's errors: the spec's and the policy's refusals put by the fields they name.

`parse_spec` and the submission service name a problem by its path in the spec
("replicas[2].gpu", "command[0]", "env.X"); here each is put by the form field or
replica row behind it, marked for assistive technology, and counted for the summary line.
"""

from __future__ import annotations

import re

from django.forms.utils import ErrorDict

from jobs.forms import JobForm, ReplicaForm
from scheduling.policy.reasons import Code

# "replicas[2].gpu" -> ("replicas", 2, "gpu"); "command[0]" -> ("command", 0, None); "env.X" -> ("env", None, "X")
ERROR_PATH = re.compile(r"^(?P<field>[a-z_]+)(?:\[(?P<index>\d+)\])?(?:\.(?P<sub>.+))?$")


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


def unjudged(form: JobForm, formset) -> None:
    """Leaves the bound form and formset showing what was typed in them, with no errors: for a
    reply about something else (a manifest that could not be read), where 'required' would mislead."""
    form.is_valid()
    formset.is_valid()
    form._errors = ErrorDict()
    for row in formset.forms:
        row._errors = ErrorDict()
    formset._errors = [row._errors for row in formset.forms]
    formset._non_form_errors = formset.error_class(error_class="nonform", renderer=formset.renderer)
