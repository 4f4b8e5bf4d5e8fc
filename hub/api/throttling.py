"""Per-user throttling of sends (messages, continue, regenerate): HUB_API_SEND_RATE.

Counts live in the cache (Redis in production, so every web process shares them).
"""

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class SendRateThrottle(UserRateThrottle):
    scope = "send"

    def get_rate(self):
        # Read at each request (not at import) so the setting can change without a code change.
        return settings.HUB_API_SEND_RATE or None

    def allow_request(self, request, view):
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)
