"""Admin forms that refuse a save from a page opened before another change of its row, instead of undoing it.

Django's admin posts back every field of the page: a page opened before a lead revoked a token would
post `revoked_at` empty again with a new name, and the token would work again; a tier page would put
back the grace period another admin had just changed. These forms carry, hidden, the row's values as
the page was loaded, and compare them with the stored row under its row lock (the admin saves in the
same transaction) before anything is written.
"""

from __future__ import annotations

import json

from django import forms
from django.core.exceptions import ValidationError

from tenants.audit import snapshot


class LoadedField(forms.CharField):
    """Hidden: what a form was loaded with, so a save from a page opened before another change is refused
    instead of undoing it. It is never an edit."""

    widget = forms.HiddenInput

    def __init__(self, **kwargs):
        super().__init__(required=False, **kwargs)

    def has_changed(self, initial, data) -> bool:
        return False


class LoadedRowForm(forms.ModelForm):
    """An admin form over one row that refuses, with nothing saved, a save from a page opened before another
    change of the fields it edits. `checked_elsewhere`: fields a subclass compares itself, with its own words."""

    row_loaded = LoadedField()
    checked_elsewhere: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["row_loaded"] = json.dumps(self._edited(self.instance), sort_keys=True)

    def _edited(self, row) -> dict:
        """The row's values of the fields this form edits, as the audit writes them."""
        values = snapshot(row)
        return {name: values[name] for name in self.fields if name in values and name not in self.checked_elsewhere}

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk:
            try:
                loaded = json.loads(cleaned.get("row_loaded") or "")
            except ValueError:
                loaded = None
            if not isinstance(loaded, dict):
                raise ValidationError("This form does not say what it was loaded with, so saving it could undo "
                                      "another change; nothing was saved — reload the page and make your change "
                                      "again.")  # fmt: skip
            model = type(self.instance)
            # FOR NO KEY UPDATE: it orders this save after any other write of the row (a revoke, another
            # admin's save) and holds up no row that merely references it (a job at this tier).
            stored = model.objects.select_for_update(no_key=True).filter(pk=self.instance.pk).first()
            if stored is None:
                raise ValidationError(f"This {model._meta.verbose_name} was deleted since you opened this page; "
                                      "nothing was saved.")  # fmt: skip
            now = self._edited(stored)
            changed = [name for name in now if name in loaded and loaded[name] != now[name]]
            if changed:
                names = ", ".join(str(model._meta.get_field(name).verbose_name) for name in changed)
                raise ValidationError(f"Since you opened this page, another change was saved to {names}; nothing "
                                      "was saved — reload the page to see it and make your change again.")  # fmt: skip
        return cleaned
