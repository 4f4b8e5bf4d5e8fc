"""The admin's history (Django's LogEntry) for repairs: who fixed what, and how."""

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import models

from hub.repair import Finding


def record_fix(*, user, finding: Finding) -> LogEntry:
    """One LogEntry per fix, on the object fixed (a search index has none: the entry names it)."""
    target = finding.target
    message = f"Repair ({finding.check}): {finding.problem} → {finding.outcome}"
    if isinstance(target, models.Model):
        return LogEntry.objects.log_actions(user.pk, [target], CHANGE, message, single_object=True)
    return LogEntry.objects.create(user_id=user.pk, content_type=None, object_id=None,
                                   object_repr=finding.subject[:200], action_flag=CHANGE, change_message=message)
