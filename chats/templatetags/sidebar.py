"""{% sidebar %}: the sidebar of every signed-in page (templates/sidebar.html)."""

from collections.abc import Iterable
from typing import NamedTuple

from django import template
from django.urls import reverse

from chats import selectors

register = template.Library()

SIDEBAR_CHATS = 50


class ChatLink(NamedTuple):
    """One chat in the plain list of the sidebar: where it opens, its title, whether it is pinned."""

    address: str
    title: str
    pinned: bool


def chat_links(chats: Iterable[tuple[object, str, bool]]) -> list[ChatLink]:
    """A ChatLink for each (id, title, pinned).

    One reverse() for the whole list: a {% url %} per chat cost a millisecond for fifty chats.
    """
    marker = "chat-id"
    address = reverse("chats:detail", args=[marker])
    return [ChatLink(address.replace(marker, str(chat_id)), title, pinned) for chat_id, title, pinned in chats]


@register.inclusion_tag("sidebar.html", takes_context=True)
def sidebar(context):
    """The chat page gives the chats of its directory (and makes the list live); any other page
    lists the newest chats. Both as links, the pinned ones first and marked."""
    chats = context.get("directory_chats")
    live = chats is not None
    if live:
        links = chat_links((chat["id"], chat["title"], chat["pinned_at"] is not None) for chat in chats)
    else:
        page = selectors.directory_page(user=context["request"].user, limit=SIDEBAR_CHATS)
        links = chat_links((chat.pk, chat.title, chat.pinned_at is not None) for chat in page.chats)
    return {"directory_links": links, "live_directory": live, "user": context["user"],
            "allow_invites": context.get("allow_invites"), "csrf_token": context.get("csrf_token"),
            "request": context["request"]}
