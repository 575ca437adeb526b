import yaml
from django.core.management.base import BaseCommand, CommandError

from jobs.models import Job
from scheduling.cluster.job_manifests import job_manifest
from scheduling.snapshot import to_cluster_job


class Command(BaseCommand):
    help = "Print the manifest (TFJob, PyTorchJob...) the Kubernetes adapter would create for a job (either backend)."

    def add_arguments(self, parser):
        parser.add_argument("job_id", type=int, help="The Gangway job id.")

    def handle(self, *args, job_id: int, **options):
        job = Job.objects.select_related("team", "tier").filter(pk=job_id).first()
        if job is None:
            raise CommandError(f"No job with id {job_id}.")
        self.stdout.write(yaml.safe_dump(job_manifest(to_cluster_job(job)), sort_keys=False))
