"""Template filters of Hub's admin pages."""

from django import template

from hub import staff_admin

register = template.Library()


@register.filter
def status_badge(text):
    """A run, message or worker state as a coloured badge."""
    return staff_admin.badge(str(text))


@register.filter
def short_id(value):
    return str(value)[:8]
