"""The Celery app. Workers run `celery -A hub worker`; embedded mode runs one inside runhub."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init, worker_process_init, worker_ready
from django.db import close_old_connections

from hub.startup import freeze_startup_heap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

app = Celery("hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def import_model_clients_before_taking_tasks(sender=None, **kwargs):
    """A worker process of its own imports them before it consumes; runhub's embedded worker does
    not, so a hub on its own starts quickly and stays small (it imports them when a turn needs them)."""
    from hub.startup import preload_model_clients

    if not str(getattr(sender, "hostname", "")).startswith("embedded@"):
        preload_model_clients()


@worker_ready.connect
@worker_process_init.connect
def freeze_heap_once_started(**kwargs):
    """A worker (or a prefork pool's child) has imported all it needs."""
    freeze_startup_heap()


@task_prerun.connect
@task_postrun.connect
def close_stale_database_connections(**kwargs):
    """Around each task, as around each request: drop a broken connection or one past its age."""
    close_old_connections()
