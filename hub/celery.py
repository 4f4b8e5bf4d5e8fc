"""The Celery app. Workers run `celery -A hub worker`; embedded mode runs one inside runhub."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

app = Celery("hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
