from django.contrib import admin

from scheduling.models import ClusterNode, Cycle, SimJob, SimNode


@admin.register(SimNode)
class SimNodeAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu", "cpu", "memory", "schedulable")
    list_filter = ("schedulable",)
    search_fields = ("name",)


@admin.register(SimJob)
class SimJobAdmin(admin.ModelAdmin):
    list_display = ("job_id", "namespace", "name", "started_at", "duration", "suspended", "finished_at", "succeeded")
    list_filter = ("suspended", "succeeded", "namespace")
    search_fields = ("name", "namespace")


@admin.register(ClusterNode)
class ClusterNodeAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu", "cpu", "memory", "outside_gpu", "seen_at")
    search_fields = ("name",)
    readonly_fields = [field.name for field in ClusterNode._meta.fields]


@admin.register(Cycle)
class CycleAdmin(admin.ModelAdmin):
    list_display = ("started_at", "duration", "admitted", "preempted", "rejected", "waiting", "cluster_reachable", "failed")
    list_filter = ("cluster_reachable", "failed")
    readonly_fields = [field.name for field in Cycle._meta.fields]
