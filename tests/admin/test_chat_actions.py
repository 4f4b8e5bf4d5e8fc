"""Chat, message and member actions in the admin: restore, purge, trash, settle a stuck reply,
remove a member — each through its service, each saying what it did, each in the admin history."""

from datetime import timedelta

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse

from agents_app.models import Run
from agents_app.turns import runs
from chats import services
from chats.models import Chat, Membership, Message
from tests.admin.conftest import start_streaming

pytestmark = pytest.mark.django_db


def act(client, changelist, action, *objects):
    response = client.post(changelist, {"action": action, "_selected_action": [str(o.pk) for o in objects],
                                        "index": 0}, follow=True)
    assert response.status_code == 200
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def history(obj) -> list[tuple[int, str]]:
    return list(LogEntry.objects.filter(object_id=str(obj.pk)).values_list("action_flag", "change_message"))


def test_restore_brings_a_chat_back_with_its_members(staff_client, user, scripted_agent):
    agent = scripted_agent(name="Keeper")
    chat = services.create_chat(owner=user, title="Trip", agents=[agent])
    services.delete_chat(chat=chat)
    live = services.create_chat(owner=user, title="Live one")

    said = act(staff_client, "/admin/chats/chat/", "restore_chats", chat, live)

    chat.refresh_from_db()
    assert chat.deleted_at is None and list(chat.memberships.values_list("agent__name", flat=True)) == ["Keeper"]
    assert "Restore — 1 done" in said and "restored with its members" in said
    assert "Restore — 1 not done" in said and "not in the trash" in said
    assert history(chat) == [(2, "Restore: restored with its members")]
    assert history(live) == []


def test_restore_refuses_a_chat_past_the_trash_window(staff_client, user, settings):
    chat = services.create_chat(owner=user, title="Old")
    services.delete_chat(chat=chat)
    Chat.objects.filter(pk=chat.pk).update(deleted_at=chat.deleted_at - timedelta(days=settings.HUB_TRASH_DAYS + 1))
    said = act(staff_client, "/admin/chats/chat/", "restore_chats", chat)
    assert "deleted more than" in said
    chat.refresh_from_db()
    assert chat.deleted_at is not None


def test_purge_deletes_a_trashed_chat_for_good_and_only_a_trashed_one(staff_client, user, asked, run_now):
    run = asked("hello")
    run_now()
    trashed = run.chat
    services.delete_chat(chat=trashed)
    live = services.create_chat(owner=user, title="Keep me")

    said = act(staff_client, "/admin/chats/chat/", "purge_chats", trashed, live)

    assert not Chat.objects.filter(pk=trashed.pk).exists()
    assert not Message.objects.filter(chat_id=trashed.pk).exists() and not Run.objects.filter(pk=run.pk).exists()
    assert Chat.objects.filter(pk=live.pk).exists()
    assert "Purge — 1 done" in said and "only a deleted chat can be purged" in said
    assert history(trashed) == [(DELETION, "Purge")]
    assert history(live) == []


def test_move_to_the_trash_from_the_chat_page(staff_client, chat):
    response = staff_client.post(reverse("admin:chats_chat_act", args=[chat.pk, "trash_chats"]))
    assert response.status_code == 302
    chat.refresh_from_db()
    assert chat.deleted_at is not None
    assert history(chat) == [(2, "Move to the trash: moved to the trash; its open tabs were closed")]


def test_settle_a_stuck_streaming_reply_and_refuse_one_that_is_still_live(staff_client, asked):
    stuck = asked("one")
    token, stuck_reply = start_streaming(stuck, "Half an ans")
    runs.finish(stuck.pk, token, Run.Status.FAILED)
    Message.objects.filter(pk=stuck_reply.pk).update(status="streaming")
    live = asked("two")
    _, live_reply = start_streaming(live, "going")
    final = live.trigger_message

    said = act(staff_client, "/admin/chats/message/", "settle_stuck", stuck_reply, live_reply, final)

    stuck_reply.refresh_from_db()
    live_reply.refresh_from_db()
    assert stuck_reply.status == "interrupted" and stuck_reply.content == "Half an ans"
    assert live_reply.status == "streaming"
    assert "1 done" in said and "settled as interrupted; 11 characters kept" in said
    assert "still has a live run" in said and "no longer streaming" in said
    assert history(stuck_reply) == [(2, "Settle as interrupted: settled as interrupted; 11 characters kept")]
    assert history(live_reply) == [] and history(final) == []
    # The stuck filter lists exactly the stuck ones.
    assert Message.objects.filter(status="streaming").count() == 1
    page = staff_client.get("/admin/chats/message/?stuck=yes").content.decode()
    assert "0 messages" in page or f">{live_reply.pk}<" not in page


def test_remove_a_member_through_the_service(staff_client, user, scripted_agent):
    agent = scripted_agent(name="Keeper")
    chat = services.create_chat(owner=user, title="Team", agents=[agent])
    membership = Membership.objects.get(chat=chat, agent=agent)
    said = act(staff_client, "/admin/chats/membership/", "remove_members", membership)
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert "Remove member — 1 done" in said
    assert history(membership) == [(DELETION, "Remove member")]


def test_forget_a_memory_entry(staff_client, user, chat):
    from chats import memory
    from chats.models import MemoryEntry

    memory.append(owner=user, text="likes tea", chat=chat)
    memory.append(owner=user, text="lives in Lyon", chat=chat)
    entry = MemoryEntry.objects.get(content="likes tea")
    act(staff_client, "/admin/chats/memoryentry/", "forget_entries", entry)
    assert list(MemoryEntry.objects.values_list("content", flat=True)) == ["lives in Lyon"]
    assert "likes tea" not in memory.get_block(owner=user, label=entry.block.label).content


def test_the_chat_list_says_how_many_temporary_chats_exist_without_their_content(staff_client, user):
    from chats.temporary.scope import inside

    for title in ("Secret plan one", "Secret plan two"):
        chat = services.create_chat(owner=user, title=title, temporary=True)
        with inside(chat.pk):
            services.send_message(chat=chat, content="a private thought")
    page = staff_client.get("/admin/chats/chat/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "2 temporary chats live now" in text
    assert "Secret plan" not in text and "private thought" not in text
