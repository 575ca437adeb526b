"""How the admin site shows stored amounts and guards records only the loop writes.

Every admin page, the refusal of a stale quota edit and the audit of a change of quota figures format
GPUs, cpu (millicores) and memory (bytes) through `quantity_text`, so they read alike and the formatter it
calls can be swapped in this one place.
"""

from __future__ import annotations

from django.contrib import admin

from core.quantities import format_cpu, format_memory
from tenants.models import Resource


def quantity_text(resource: str, amount: int | None) -> str:
    """`amount` of a resource as a person reads it: "2 CPUs", "500m CPU", "512 GiB", "8 GPUs"; "—" for None.

    Memory is exact, in the largest binary unit that holds it whole, spelled as the pages spell it
    ("512 GiB", "1536 KiB"); an amount no such unit holds whole is in bytes ("1000000000 B")."""
    if amount is None:
        return "—"
    if resource == Resource.CPU:
        return f"{format_cpu(amount)} CPU{'s' if amount % 1000 == 0 and amount != 1000 else ''}"
    if resource == Resource.MEMORY:
        quantity = format_memory(amount)  # "512Gi", or bare bytes
        return f"{quantity[:-2]} {quantity[-2:]}B" if quantity.endswith("i") else f"{quantity} B"
    return f"{amount} GPU{'' if amount == 1 else 's'}"


def amount_column(field: str, resource: str, description: str):
    """A list_display column showing the model's `field` (an amount of `resource`) as a quantity."""

    @admin.display(description=description, ordering=field)
    def column(obj) -> str:
        return quantity_text(resource, getattr(obj, field))

    column.__name__ = f"{field}_shown"
    return column


class LoopRecordAdmin(admin.ModelAdmin):
    """A record only the admission loop, reconcile or a worker writes: shown, never added, changed or deleted here.

    An edit by hand would disagree with what the loop reads back (a node
    mirror is overwritten on the next cycle; a cycle row or a delivery is
    history that metrics and the pages count on).
    """

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
