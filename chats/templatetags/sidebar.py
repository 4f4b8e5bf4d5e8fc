"""{% sidebar %}: the sidebar of every signed-in page (templates/sidebar.html)."""

from django import template
from django.urls import reverse

from chats import selectors

register = template.Library()

SIDEBAR_CHATS = 50


@register.inclusion_tag("sidebar.html", takes_context=True)
def sidebar(context):
    """The chat page gives its own directory_links (and makes the list live); any other page
    lists the newest chats as links."""
    links = context.get("directory_links")
    live = links is not None
    if links is None:
        user = context["request"].user
        marker = "chat-id"
        address = reverse("chats:detail", args=[marker])
        links = [(address.replace(marker, str(chat.pk)), chat.title)
                 for chat in selectors.directory_page(user=user, limit=SIDEBAR_CHATS).chats]
    return {"directory_links": links, "live_directory": live, "user": context["user"],
            "allow_invites": context.get("allow_invites"), "csrf_token": context.get("csrf_token"),
            "request": context["request"]}
