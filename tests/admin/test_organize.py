"""Folders and tags in the admin: listed with their chats, a folder's name and instructions
edited through the service (a clash named on its field), folders and tags deleted through their
services (the chats stay); chats archived, restored from the archive and unpinned."""

import pytest
from django.contrib.messages import get_messages

from chats import services
from chats.models import Chat, Folder, Tag

pytestmark = pytest.mark.django_db


def act(client, changelist, action, *objects):
    response = client.post(changelist, {"action": action, "_selected_action": [str(o.pk) for o in objects],
                                        "index": 0}, follow=True)
    assert response.status_code == 200
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def test_folders_and_tags_are_listed_with_their_chats(staff_client, user):
    folder = services.create_folder(owner=user, name="Research", instructions="Cite sources.")
    chat = services.organize_chat(chat=services.create_chat(owner=user, title="Papers"), folder=folder,
                                  tags=["reading"], pinned=True)
    folders = staff_client.get("/admin/chats/folder/").content.decode()
    assert "Research" in folders and "Cite sources." in folders and user.username in folders
    assert "reading" in staff_client.get("/admin/chats/tag/").content.decode()
    page = staff_client.get(f"/admin/chats/chat/{chat.pk}/change/").content.decode()
    assert "pinned" in page and "Research" in page and "tags: reading" in page
    assert "Papers" in staff_client.get(f"/admin/chats/chat/?folder__id__exact={folder.pk}").content.decode()
    assert "Papers" in staff_client.get("/admin/chats/chat/?archived=pinned").content.decode()


def test_a_folder_is_edited_through_its_service_and_a_clash_is_named(staff_client, user):
    services.create_folder(owner=user, name="Taken")
    folder = services.create_folder(owner=user, name="Mine")
    url = f"/admin/chats/folder/{folder.pk}/change/"
    clash = staff_client.post(url, {"name": "taken", "instructions": ""})
    assert clash.status_code == 200 and "you already have a folder named" in clash.content.decode()
    saved = staff_client.post(url, {"name": "Renamed", "instructions": "Be terse."})
    assert saved.status_code == 302
    folder.refresh_from_db()
    assert (folder.name, folder.instructions) == ("Renamed", "Be terse.")


def test_deleting_a_folder_or_a_tag_keeps_the_chats(staff_client, user):
    folder = services.create_folder(owner=user, name="Old")
    chat = services.organize_chat(chat=services.create_chat(owner=user, title="Kept"), folder=folder, tags=["x"])
    said = act(staff_client, "/admin/chats/folder/", "delete_folders", folder)
    assert "Delete folder — 1 done" in said and not Folder.objects.exists()
    said = act(staff_client, "/admin/chats/tag/", "delete_tags", Tag.objects.get())
    assert "taken off 1 chat(s)" in said and not Tag.objects.exists()
    chat.refresh_from_db()
    assert chat.folder_id is None and chat.deleted_at is None and not chat.tags.exists()


def test_chats_are_archived_restored_and_unpinned_from_the_admin(staff_client, user):
    chat = services.pin_chat(chat=services.create_chat(owner=user, title="Pinned"))
    said = act(staff_client, "/admin/chats/chat/", "unpin_chats", chat)
    assert "Unpin — 1 done" in said and Chat.objects.get(pk=chat.pk).pinned_at is None
    act(staff_client, "/admin/chats/chat/", "archive_chats", chat)
    assert Chat.objects.get(pk=chat.pk).archived_at is not None
    said = act(staff_client, "/admin/chats/chat/", "archive_chats", chat)
    assert "already archived" in said
    act(staff_client, "/admin/chats/chat/", "unarchive_chats", chat)
    assert Chat.objects.get(pk=chat.pk).archived_at is None
