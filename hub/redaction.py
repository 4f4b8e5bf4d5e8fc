"""Keeping the passwords in connection URLs out of error pages, reports and log lines."""

import re
from urllib.parse import urlparse

from django.views.debug import SafeExceptionReporterFilter


def redact(url: str) -> str:
    """The URL with its password replaced by ***: what a log line or an error may show."""
    parts = urlparse(url)
    if not parts.password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()


class SettingsFilter(SafeExceptionReporterFilter):
    """Django's filter, which hides settings named like API, KEY, SECRET or PASS, misses URLs that
    carry a password (REDIS_URL, DATABASE_URL, CELERY_BROKER_URL, the channel layer's address):
    the debug page and the error reports hide those too."""

    hidden_settings = re.compile("API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|ADDRESS", flags=re.I)
