"""Token figures as people read them: 1,234,567."""

from django import template

register = template.Library()


@register.filter
def tokens(value) -> str:
    try:
        return f"{int(value or 0):,}"
    except (TypeError, ValueError):
        return "0"


@register.filter
def share_of(value, whole) -> int:
    """value as a whole percentage of whole (0 when whole is 0), for a bar's width."""
    try:
        return max(0, min(100, round(100 * int(value or 0) / int(whole)))) if int(whole or 0) else 0
    except (TypeError, ValueError):
        return 0
