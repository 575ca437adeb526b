"""The simulated cluster fails a job that runs past its max runtime, as the operator does past its manifest's
activeDeadlineSeconds (`SimJob.deadline`). NULL: no limit, as on the rows the code before it inserts."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0017_sim_job_stalls'),
    ]

    operations = [
        migrations.AddField(
            model_name='simjob',
            name='deadline',
            field=models.PositiveIntegerField(blank=True, help_text='Seconds it may run from its latest start (activeDeadlineSeconds) before it fails; empty: no limit.', null=True),
        ),
    ]
