"""Keeping chats in order: pins, the archive (and its clean-up of idle chats), folders, tags, the
directory's filters and their cost, the page's JSON routes, and branching from a message."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from chats import events, search, selectors, services
from chats.models import Chat, Folder, Tag
from chats.services import organize
from hub.errors import Conflict, InvalidInput, NotFound

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """Every event broadcast after commit, as (group, event)."""
    record = []
    monkeypatch.setattr(events, "relay", lambda group, batch: record.extend((group, event) for event in batch))
    return record


def titles(page) -> list[str]:
    return [c.title for c in page.chats]


def aged(chat, days: float) -> Chat:
    Chat.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - timedelta(days=days))
    chat.refresh_from_db()
    return chat


# --- Pins and the archive ------------------------------------------------------------------------

def test_pinned_chats_head_the_first_page_and_are_not_repeated_below(user):
    chats = [aged(services.create_chat(owner=user, title=f"Chat {n}"), days=10 - n) for n in range(6)]
    services.pin_chat(chat=chats[0])  # the oldest
    services.pin_chat(chat=chats[2])

    first = selectors.directory_page(user=user, limit=2)
    assert titles(first) == ["Chat 2", "Chat 0", "Chat 5", "Chat 4"]  # most recently pinned first
    rest = selectors.directory_page(user=user, limit=2, before=first.next_cursor)
    assert titles(rest) == ["Chat 3", "Chat 1"] and rest.next_cursor is None
    services.pin_chat(chat=chats[2], pinned=False)
    assert titles(selectors.directory_page(user=user, limit=10)) == ["Chat 0", "Chat 5", "Chat 4", "Chat 3", "Chat 2",
                                                                     "Chat 1"]


def test_pins_are_capped(user, monkeypatch):
    monkeypatch.setattr(organize, "MAX_PINNED", 2)
    for n in range(2):
        services.pin_chat(chat=services.create_chat(owner=user, title=f"Pinned {n}"))
    with pytest.raises(InvalidInput) as refused:
        services.pin_chat(chat=services.create_chat(owner=user, title="One too many"))
    assert "pinned" in refused.value.fields and "unpin one first" in refused.value.message


def test_archived_chats_leave_the_list_stay_searchable_and_come_back(user):
    kept = services.create_chat(owner=user, title="Kept")
    old = services.create_chat(owner=user, title="Old project")
    services.send_message(chat=old, content="the zeppelin budget")
    services.pin_chat(chat=old)
    old = services.archive_chat(chat=old)

    assert old.archived_at is not None and old.pinned_at is None  # an archived chat is not pinned
    assert titles(selectors.directory_page(user=user)) == ["Kept"]
    assert titles(selectors.directory_page(user=user, archived=True)) == ["Old project"]
    assert [h.chat_id for h in search.search_messages(owner=user, query="zeppelin")] == [str(old.pk)]
    with pytest.raises(InvalidInput):
        services.pin_chat(chat=old)

    services.archive_chat(chat=old, archived=False)
    assert titles(selectors.directory_page(user=user)) == ["Old project", "Kept"]
    assert selectors.directory_page(user=user, archived=True).chats == []
    assert Chat.objects.get(pk=kept.pk).archived_at is None


def test_a_new_message_brings_an_archived_chat_back(user):
    chat = services.archive_chat(chat=services.create_chat(owner=user, title="Dormant"))
    services.send_message(chat=chat, content="I am back")
    assert Chat.objects.get(pk=chat.pk).archived_at is None
    assert titles(selectors.directory_page(user=user)) == ["Dormant"]


def test_the_archive_pages_by_when_chats_were_archived(user):
    for n in range(5):
        chat = services.archive_chat(chat=services.create_chat(owner=user, title=f"Archived {n}"))
        Chat.objects.filter(pk=chat.pk).update(archived_at=timezone.now() - timedelta(hours=10 - n))
    first = selectors.directory_page(user=user, archived=True, limit=2)
    second = selectors.directory_page(user=user, archived=True, limit=2, before=first.next_cursor)
    third = selectors.directory_page(user=user, archived=True, limit=2, before=second.next_cursor)
    assert titles(first) + titles(second) + titles(third) == [f"Archived {n}" for n in (4, 3, 2, 1, 0)]
    assert third.next_cursor is None


@pytest.mark.django_db(transaction=True)  # events go out on commit
def test_pin_archive_move_and_tag_tell_every_tab(user, sent):
    chat = services.create_chat(owner=user, title="Live")
    folder = services.create_folder(owner=user, name="Work")
    sent.clear()
    services.pin_chat(chat=chat)
    services.pin_chat(chat=chat)  # no change: no event
    services.move_chat(chat=chat, folder=folder)
    services.tag_chat(chat=chat, name="urgent")
    services.archive_chat(chat=chat)
    directory = [e for g, e in sent if g == events.user_group(user.pk) and e["type"] == "directory.updated"]
    assert [e["change"] for e in directory] == ["pinned", "moved", "tagged", "archived"]
    last = json.loads(json.dumps(directory[-1]))["chat"]
    assert last["folder_id"] == folder.pk and last["tags"] == ["urgent"] and last["archived_at"]
    assert last["pinned_at"] is None
    assert [e["type"] for g, e in sent if g == events.chat_group(chat.pk)] == ["chat.updated"] * 4


@pytest.mark.django_db(transaction=True)
def test_archive_after_days_archives_idle_unpinned_chats_only(user, other_user, settings, sent):
    settings.HUB_ARCHIVE_AFTER_DAYS = 30
    aged(services.create_chat(owner=user, title="Idle"), days=31)
    aged(services.create_chat(owner=other_user, title="Theirs, idle"), days=40)
    services.pin_chat(chat=aged(services.create_chat(owner=user, title="Pinned, idle"), days=90))
    aged(services.create_chat(owner=user, title="Recent"), days=29)
    services.delete_chat(chat=aged(services.create_chat(owner=user, title="Trashed"), days=60))
    sent.clear()

    from chats import tasks

    assert tasks.archive_idle_chats() == 2
    archived = set(Chat.objects.filter(archived_at__isnull=False).values_list("title", flat=True))
    assert archived == {"Idle", "Theirs, idle"}
    changes = {(g, e["chat"]["title"], e["change"]) for g, e in sent if e["type"] == "directory.updated"}
    assert changes == {(events.user_group(user.pk), "Idle", "archived"),
                       (events.user_group(other_user.pk), "Theirs, idle", "archived")}
    assert services.archive_idle_chats() == 0  # nothing left to do


def test_archive_after_days_off_when_empty_or_zero(user, settings):
    aged(services.create_chat(owner=user, title="Ancient"), days=3650)
    settings.HUB_ARCHIVE_AFTER_DAYS = 0
    assert services.archive_idle_chats() == 0
    assert not Chat.objects.filter(archived_at__isnull=False).exists()


def test_the_clean_up_is_scheduled_for_beat_in_both_run_modes(settings):
    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["chats.archive_idle_chats"] == schedule["chats.purge_trash"] == 3600.0


# --- Folders -------------------------------------------------------------------------------------

def test_folders_rename_take_instructions_and_delete_without_their_chats(user):
    folder = services.create_folder(owner=user, name="  Garden   work ", instructions="Use metric units.")
    assert folder.name == "Garden work"
    chat = services.move_chat(chat=services.create_chat(owner=user, title="Beds"), folder=folder)
    services.create_chat(owner=user, title="Elsewhere")
    assert titles(selectors.directory_page(user=user, folder=folder)) == ["Beds"]

    services.update_folder(folder=folder, name="Allotment", instructions="Use metric units and Latin names.")
    assert selectors.folder_instructions(chat=Chat.objects.get(pk=chat.pk)) == "Use metric units and Latin names."
    services.delete_folder(folder=folder)
    chat.refresh_from_db()
    assert chat.folder_id is None and chat.deleted_at is None
    assert selectors.folder_instructions(chat=chat) == ""


@pytest.mark.parametrize("name, problem", [
    ("", "may not be empty"), ("   ", "may not be empty"), ("x" * 101, "at most 100 characters"),
    (7, "must be text"), ("work", "you already have a folder named “work”"),
])
def test_a_folder_name_is_checked_and_names_its_field(user, name, problem):
    services.create_folder(owner=user, name="Work")
    with pytest.raises(InvalidInput) as refused:
        services.create_folder(owner=user, name=name)
    assert refused.value.fields == {"name": [problem]}
    assert Folder.objects.filter(owner=user).count() == 1


def test_folder_instructions_are_capped(user):
    with pytest.raises(InvalidInput) as refused:
        services.create_folder(owner=user, name="Long", instructions="x" * (organize.FOLDER_INSTRUCTIONS_MAX_CHARS + 1))
    assert "instructions" in refused.value.fields


def test_another_users_folder_is_not_found(user, other_user):
    theirs = services.create_folder(owner=other_user, name="Private")
    with pytest.raises(NotFound):
        selectors.folder_for_user(user=user, folder_id=theirs.pk)
    with pytest.raises(InvalidInput) as refused:
        selectors.folder_for_user(user=user, folder_id=theirs.pk, field="folder_id")
    assert refused.value.fields == {"folder_id": [f"no folder {theirs.pk}"]}
    with pytest.raises(InvalidInput):
        services.move_chat(chat=services.create_chat(owner=user, title="Mine"), folder=theirs)
    assert selectors.folders_for_user(user=user) == []


# --- Tags ----------------------------------------------------------------------------------------

def test_tags_are_made_on_first_use_matched_in_any_case_and_dropped_when_unused(user):
    one = services.tag_chat(chat=services.create_chat(owner=user, title="One"), name="  Work ")
    two = services.tag_chat(chat=services.create_chat(owner=user, title="Two"), name="work")
    assert Tag.objects.filter(owner=user).count() == 1
    assert [t.name for t in two.tags.all()] == ["Work"]
    services.tag_chat(chat=one, name="WORK")  # already there
    assert one.tags.count() == 1
    tag = selectors.tag_for_user(user=user, name="work")
    assert titles(selectors.directory_page(user=user, tag=tag)) == ["Two", "One"]
    assert selectors.tags_for_user(user=user) == [{"id": tag.pk, "name": "Work", "chat_count": 2}]

    services.untag_chat(chat=one, name="work")
    services.untag_chat(chat=two, name="Work")
    assert not Tag.objects.filter(owner=user).exists()
    with pytest.raises(NotFound):
        selectors.tag_for_user(user=user, name="work")


def test_tag_names_and_the_per_chat_cap_are_checked(user, monkeypatch):
    chat = services.create_chat(owner=user, title="Tagged")
    for bad, problem in (("", "may not be empty"), ("x" * 51, "at most 50 characters"), (None, "must be text")):
        with pytest.raises(InvalidInput) as refused:
            services.tag_chat(chat=chat, name=bad)
        assert refused.value.fields == {"tags": [problem]}
    monkeypatch.setattr(organize, "MAX_TAGS_PER_CHAT", 2)
    services.tag_chat(chat=chat, name="a")
    services.tag_chat(chat=chat, name="b")
    with pytest.raises(InvalidInput):
        services.tag_chat(chat=chat, name="c")
    assert sorted(t.name for t in chat.tags.all()) == ["a", "b"]


def test_another_users_tag_of_the_same_name_is_theirs(user, other_user):
    services.tag_chat(chat=services.create_chat(owner=other_user, title="Theirs"), name="secret")
    with pytest.raises(NotFound):
        selectors.tag_for_user(user=user, name="secret")
    services.tag_chat(chat=services.create_chat(owner=user, title="Mine"), name="secret")
    tag = selectors.tag_for_user(user=user, name="secret")
    assert titles(selectors.directory_page(user=user, tag=tag)) == ["Mine"]


# --- Temporary chats -----------------------------------------------------------------------------

@pytest.mark.parametrize("change", [
    lambda chat, folder: services.pin_chat(chat=chat),
    lambda chat, folder: services.archive_chat(chat=chat),
    lambda chat, folder: services.move_chat(chat=chat, folder=folder),
    lambda chat, folder: services.tag_chat(chat=chat, name="later"),
])
def test_a_temporary_chat_cannot_be_organized_until_saved(user, change):
    from chats.temporary import chats as temporary_chats

    folder = services.create_folder(owner=user, name="Somewhere")
    chat = services.create_chat(owner=user, title="Passing thought", temporary=True)
    with temporary_chats.place_of(chat.pk):
        with pytest.raises(Conflict) as refused:
            change(selectors.chat_for_user(user=user, chat_id=chat.pk), folder)
    assert "save it first" in refused.value.message
    assert not Tag.objects.exists() and not Chat.objects.filter(pk=chat.pk).exists()


# --- The directory's cost ------------------------------------------------------------------------

@pytest.mark.parametrize("filtered", ["none", "folder", "tag", "archived"])
def test_a_page_costs_the_same_few_queries_with_any_filter_however_many_chats(user, filtered):
    folder = services.create_folder(owner=user, name="F")

    def make(count):
        for n in range(count):
            chat = services.create_chat(owner=user, title=f"Chat {n}")
            services.organize_chat(chat=chat, folder=folder, tags=["t", f"tag {n}"], pinned=n % 7 == 0)
            if filtered == "archived":
                services.archive_chat(chat=chat)

    def page_queries():
        tag = Tag.objects.get(owner=user, name="t")
        options = {"folder": {"folder": folder}, "tag": {"tag": tag}, "archived": {"archived": True}}.get(filtered, {})
        with CaptureQueriesContext(connection) as first:
            page = selectors.directory_page(user=user, limit=5, **options)
            [events.chat_payload(c) for c in page.chats]
        with CaptureQueriesContext(connection) as second:
            later = selectors.directory_page(user=user, limit=5, before=page.next_cursor, **options)
            [events.chat_payload(c) for c in later.chats]
        assert all("tags" in events.chat_payload(c) for c in page.chats + later.chats)
        return len(first), len(second)

    make(8)
    few = page_queries()
    make(40)
    assert page_queries() == few
    assert few[0] <= 3 and few[1] <= 2  # pinned (first page), the page, its tags


# --- The page's JSON routes ----------------------------------------------------------------------

def post(client, name, args, body=None):
    return client.post(reverse(f"chats:{name}", args=args), json.dumps(body or {}), content_type="application/json")


def test_the_page_pins_files_tags_and_filters(client, user):
    client.force_login(user)
    chat = services.create_chat(owner=user, title="Plans")
    services.create_chat(owner=user, title="Other")
    created = post(client, "folders", [], {"name": "Projects", "instructions": "Be brief."})
    assert created.status_code == 201
    folder_id = created.json()["folder"]["id"]

    answer = post(client, "organize", [chat.pk], {"pinned": True, "folder_id": folder_id})
    assert answer.status_code == 200
    assert answer.json()["chat"]["folder_id"] == folder_id and answer.json()["chat"]["pinned_at"]
    assert post(client, "tag_add", [chat.pk], {"name": "ideas"}).json()["chat"]["tags"] == ["ideas"]

    listed = client.get(reverse("chats:directory"), {"folder": folder_id}).json()["chats"]
    assert [c["title"] for c in listed] == ["Plans"] and listed[0]["tags"] == ["ideas"]
    assert [c["title"] for c in client.get(reverse("chats:directory"), {"tag": "IDEAS"}).json()["chats"]] == ["Plans"]
    state = client.get(reverse("chats:folders")).json()
    assert state["folders"][0]["instructions"] == "Be brief." and state["tags"][0]["chat_count"] == 1

    assert post(client, "tag_remove", [chat.pk], {"name": "ideas"}).json()["chat"]["tags"] == []
    assert post(client, "organize", [chat.pk], {"archived": True}).json()["chat"]["archived_at"]
    assert [c["title"] for c in client.get(reverse("chats:directory"), {"archived": "1"}).json()["chats"]] == ["Plans"]
    renamed = post(client, "folder_update", [folder_id], {"name": "Old projects"})
    assert renamed.json()["folder"]["name"] == "Old projects"
    assert post(client, "folder_delete", [folder_id]).status_code == 200
    assert Chat.objects.get(pk=chat.pk).folder_id is None


def test_the_page_answers_bad_input_by_field_and_others_objects_with_404(client, user, other_user):
    client.force_login(user)
    chat = services.create_chat(owner=user, title="Mine")
    theirs = services.create_chat(owner=other_user, title="Theirs")
    their_folder = services.create_folder(owner=other_user, name="Theirs")

    refused = post(client, "organize", [chat.pk], {"pinned": "yes"})
    assert refused.status_code == 400 and refused.json()["error"]["fields"] == {"pinned": ["must be true or false"]}
    refused = post(client, "organize", [chat.pk], {"folder_id": their_folder.pk})
    assert refused.status_code == 400 and "folder_id" in refused.json()["error"]["fields"]
    refused = post(client, "organize", [chat.pk], {"tags": "a,b"})
    assert refused.status_code == 400 and "tags" in refused.json()["error"]["fields"]
    refused = post(client, "folders", [], {"name": ""})
    assert refused.status_code == 400 and refused.json()["error"]["fields"] == {"name": ["may not be empty"]}
    assert post(client, "organize", [theirs.pk], {"pinned": True}).status_code == 404
    assert post(client, "tag_add", [theirs.pk], {"name": "x"}).status_code == 404
    assert post(client, "folder_update", [their_folder.pk], {"name": "Mine now"}).status_code == 404
    assert post(client, "folder_delete", [their_folder.pk]).status_code == 404
    assert client.get(reverse("chats:directory"), {"folder": their_folder.pk}).status_code == 404
    assert client.get(reverse("chats:directory"), {"folder": "nope"}).status_code == 404
    assert client.get(reverse("chats:directory"), {"tag": "unknown"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.pinned_at is None and Folder.objects.get(pk=their_folder.pk).name == "Theirs"


def test_branch_from_here_opens_a_new_chat_in_the_same_folder_with_the_same_tags(client, user, other_user):
    client.force_login(user)
    folder = services.create_folder(owner=user, name="Recipes")
    chat = services.organize_chat(chat=services.create_chat(owner=user, title="Soup"), folder=folder, tags=["food"])
    first = services.send_message(chat=chat, content="leek and potato")
    services.send_message(chat=chat, content="or tomato")

    answer = post(client, "message_branch", [chat.pk, first.pk])
    assert answer.status_code == 201
    state = answer.json()
    assert state["chat"]["title"] == "Soup (branch)" and state["chat"]["forked_from"] == str(chat.pk)
    assert state["chat"]["folder_id"] == folder.pk and state["chat"]["tags"] == ["food"]
    assert [m["content"] for m in state["page"]["messages"]] == ["leek and potato"]

    theirs = services.create_chat(owner=other_user, title="Theirs")
    their_message = services.send_message(chat=theirs, content="private")
    assert post(client, "message_branch", [theirs.pk, their_message.pk]).status_code == 404
    assert post(client, "message_branch", [chat.pk, their_message.pk]).status_code == 404
    assert not Chat.objects.filter(forked_from=theirs).exists()


def test_the_sidebar_of_every_page_marks_the_pinned_chats_and_lists_them_first(client, user):
    plain = services.create_chat(owner=user, title="Plain talk")
    pinned = services.create_chat(owner=user, title="Kept on top")
    services.create_chat(owner=user, title="Newest talk")
    organize.pin_chat(chat=pinned)
    client.force_login(user)

    for page in [reverse("agents:list"), reverse("chats:detail", args=[plain.pk])]:
        html = client.get(page).content.decode()
        sidebar = html[html.index('id="directory-slot"'):html.index('class="sidebar-foot"')]
        items = sidebar.split('<li class="dir-item">')[1:]
        assert [("Kept on top" in item, "Pinned: " in item) for item in items] == [
            (True, True), (False, False), (False, False)], page
