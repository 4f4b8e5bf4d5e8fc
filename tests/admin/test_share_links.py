"""Share links in the admin: listed with their chat, owner and times, the token only by its first
characters (it is a bearer secret), and revoked through the service by an action."""

import pytest
from django.urls import reverse

from chats import services
from chats.models import ShareLink
from tests.admin.test_chat_actions import act, history

pytestmark = pytest.mark.django_db


def test_the_list_and_the_page_show_a_links_chat_owner_and_times_never_its_token(staff_client, user):
    chat = services.create_chat(owner=user, title="Holiday plans")
    services.send_message(chat=chat, content="hello")
    link = services.share_chat(chat=chat, include_notes=True)

    listed = staff_client.get(reverse("admin:chats_sharelink_changelist")).content.decode()
    assert "Holiday plans" in listed and user.username in listed and f"{link.token[:6]}…" in listed
    assert link.token not in listed
    page = staff_client.get(reverse("admin:chats_sharelink_change", args=[link.pk])).content.decode()
    assert "Holiday plans" in page and "1 message(s) in 1 thread(s)" in page and link.token not in page
    assert staff_client.get(reverse("admin:chats_sharelink_changelist") + f"?q={link.token}").status_code == 200


def test_revoke_stops_a_link_and_is_in_the_history(staff_client, user, client):
    chat = services.create_chat(owner=user, title="Leaked")
    link = services.share_chat(chat=chat)
    kept = services.share_chat(chat=chat)

    said = act(staff_client, reverse("admin:chats_sharelink_changelist"), "revoke_links", link)
    assert "Revoke — 1 done" in said
    assert ShareLink.objects.get(pk=link.pk).revoked_at is not None
    assert ShareLink.objects.get(pk=kept.pk).revoked_at is None
    assert history(link) == [(2, "Revoke: revoked")]
    assert client.get(f"/s/{link.token}/").status_code == 404 and client.get(f"/s/{kept.token}/").status_code == 200

    again = act(staff_client, reverse("admin:chats_sharelink_changelist"), "revoke_links", link)
    assert "Revoke — 1 not done" in again and "already revoked" in again
