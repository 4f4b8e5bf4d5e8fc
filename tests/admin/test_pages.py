"""The admin's pages: big lists page in a fixed number of queries, detail pages show what a support
person needs (a run's question, reply, history and timeline; a chat's members, messages, runs)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from agents_app.models import Run
from chats import services
from chats.models import Chat, Message

pytestmark = pytest.mark.django_db


def make_turns(user, make_agent, chats: range, per_chat: int = 2):
    """A chat for each number, each with an agent of its own and per_chat questions with a queued run each."""
    for i in chats:
        agent = make_agent(user, name=f"Agent {i}", model="test:scripted")
        chat = services.create_chat(owner=user, title=f"Chat {i}", agents=[agent])
        for j in range(per_chat):
            services.send_message(chat=chat, content=f"question {j} in chat {i}")


LISTS = [
    "/admin/agents_app/run/", "/admin/agents_app/run/?status__exact=queued&attention=waiting",
    "/admin/chats/message/", "/admin/chats/message/?kind__exact=message&stuck=yes", "/admin/chats/chat/",
    "/admin/chats/chat/?trash=live", "/admin/agents_app/agent/", "/admin/chats/membership/",
    "/admin/chats/thread/", "/admin/admin/logentry/", "/admin/agents_app/worker/",
]


def test_big_lists_take_the_same_queries_for_5_rows_as_for_40(staff_client, user, make_agent,
                                                                 django_assert_max_num_queries):
    make_turns(user, make_agent, range(5))
    counts = {}
    for url in LISTS:
        with django_assert_max_num_queries(12) as few:
            assert staff_client.get(url).status_code == 200, url
        counts[url] = len(few.captured_queries)
    make_turns(user, make_agent, range(5, 40))
    for chat in Chat.objects.filter(title__in=["Chat 7", "Chat 8"]):
        services.delete_chat(chat=chat)
    for url in LISTS:
        with django_assert_max_num_queries(counts[url]):
            response = staff_client.get(url)
        assert response.status_code == 200, url
    assert "Chat 39" in staff_client.get("/admin/chats/chat/").content.decode()


def test_the_runs_list_shows_status_agent_chat_worker_and_error(staff_client, asked):
    run = asked("hello")
    Run.objects.filter(pk=run.pk).update(status="failed", error="The provider said: rate limited",
                                         finished_at=timezone.now())
    page = staff_client.get("/admin/agents_app/run/").content.decode()
    assert str(run.pk)[:8] in page and "failed" in page and asked.agent.name in page
    assert "The provider said: rate limited" in page
    assert reverse("admin:agents_app_run_timeline", args=[run.pk]) in page
    # Found by the first characters of its id, by its error, and by the "needs attention" filter.
    assert str(run.pk)[:8] in staff_client.get(f"/admin/agents_app/run/?q={str(run.pk)[:8]}").content.decode()
    assert str(run.pk)[:8] in staff_client.get("/admin/agents_app/run/?q=rate+limited").content.decode()
    assert str(run.pk)[:8] in staff_client.get("/admin/agents_app/run/?attention=failed_today").content.decode()
    assert str(run.pk)[:8] not in staff_client.get("/admin/agents_app/run/?attention=past_lease").content.decode()


def test_a_run_page_links_its_question_and_reply_and_lists_its_history(staff_client, asked, run_now):
    run = asked("What is a pelican?")
    run_now()
    run.refresh_from_db()
    page = staff_client.get(reverse("admin:agents_app_run_change", args=[run.pk])).content.decode()
    assert "What is a pelican?" in page
    assert reverse("admin:chats_message_change", args=[run.trigger_message_id]) in page
    assert reverse("admin:chats_message_change", args=[run.reply_message_id]) in page
    assert "The quick brown fox" in page  # the reply's text
    for status in ("queued", "running", "succeeded"):
        assert f">{status}<" in page
    assert 'name="_save"' not in page  # read-only: runs change through actions only
    # The buttons are the actions that make sense now: none for a turn that succeeded.
    assert ">Retry<" not in page and ">Recover now<" not in page
    queued = asked("another")
    page = staff_client.get(reverse("admin:agents_app_run_change", args=[queued.pk])).content.decode()
    assert ">Recover now<" in page and ">Cancel<" in page and ">Retry<" not in page


def test_the_message_list_finds_by_id_and_by_words_through_the_index(staff_client, user, chat):
    wanted = services.send_message(chat=chat, content="The pelicans migrate in spring")
    other = services.send_message(chat=chat, content="Nothing to see")
    by_words = staff_client.get("/admin/chats/message/?q=pelic+spri").content.decode()
    assert f">{wanted.pk}<" in by_words and f">{other.pk}<" not in by_words
    by_id = staff_client.get(f"/admin/chats/message/?q={other.pk}").content.decode()
    assert f">{other.pk}<" in by_id and f">{wanted.pk}<" not in by_id
    # Query syntax in a search is just words, never an error.
    assert staff_client.get("/admin/chats/message/?q=%22%29%28+OR+*").status_code == 200


def test_a_chat_page_shows_members_threads_latest_messages_and_runs(staff_client, user, asked):
    run = asked("first question")
    services.send_message(chat=run.chat, content="in a thread", new_thread_title="Side topic")
    page = staff_client.get(reverse("admin:chats_chat_change", args=[run.chat_id])).content.decode()
    assert asked.agent.name in page and "Side topic" in page
    assert "first question" in page and "in a thread" in page
    assert reverse("admin:agents_app_run_change", args=[run.pk]) in page
    assert ">Move to the trash<" in page and ">Restore from the trash<" not in page
    services.delete_chat(chat=run.chat)
    page = staff_client.get(reverse("admin:chats_chat_change", args=[run.chat_id])).content.decode()
    assert ">Restore from the trash<" in page and ">Move to the trash<" not in page


def test_editing_a_chat_goes_through_the_service(staff_client, chat):
    url = reverse("admin:chats_chat_change", args=[chat.pk])
    response = staff_client.post(url, {"title": "Renamed by support", "description": "d", "picture": "",
                                       "memberships-TOTAL_FORMS": 0, "memberships-INITIAL_FORMS": 0,
                                       "threads-TOTAL_FORMS": 0, "threads-INITIAL_FORMS": 0, "_save": "Save"})
    assert response.status_code == 302, response.content.decode()[:2000]
    chat.refresh_from_db()
    assert chat.title == "Renamed by support"


def test_an_agent_page_shows_its_chats_and_recent_runs_and_edits_through_the_service(staff_client, asked):
    run = asked("x")
    agent = asked.agent
    url = reverse("admin:agents_app_agent_change", args=[agent.pk])
    page = staff_client.get(url).content.decode()
    assert reverse("admin:chats_chat_change", args=[agent.main_chat_id]) in page
    assert str(run.pk)[:8] in page
    # A bad model string is refused with the field named, and nothing is stored.
    form = {"name": agent.name, "avatar": "", "description": "", "model": "nonsense:thing", "base_url": "",
            "system_prompt": "", "settings": "{}", "tools": "[]", "reply_policy": "always",
            "recovery_policy": "continue", "_save": "Save"}
    response = staff_client.post(url, form)
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    agent.refresh_from_db()
    assert agent.model == "test:scripted"
    response = staff_client.post(url, {**form, "model": "test:scripted", "name": "Renamed"})
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.name == "Renamed"


def test_a_shared_agent_is_made_in_the_admin_through_the_service(staff_client):
    from agents_app.models import Agent

    form = {"name": "Helper", "avatar": "", "description": "", "model": "test:scripted", "base_url": "",
            "system_prompt": "", "settings": "{}", "tools": "[]", "reply_policy": "always",
            "recovery_policy": "continue", "_save": "Save"}
    response = staff_client.post(reverse("admin:agents_app_agent_add"), form)
    assert response.status_code == 302
    agent = Agent.objects.get(name="Helper")
    assert agent.owner is None and agent.main_chat is None


def test_secrets_never_reach_an_admin_page(staff_client, user):
    from agents_app import remotes, secrets

    secrets.store_key(owner=user, provider="openai", key="sk-very-secret-key-1234")
    remote = remotes.create_remote(owner=user, name="Tools", url="http://127.0.0.1:9/mcp",
                                   headers={"Authorization": "Bearer remote-secret-token"})
    for url in ("/admin/agents_app/providerkey/", "/admin/agents_app/remote/",
                reverse("admin:agents_app_remote_change", args=[remote.pk])):
        page = staff_client.get(url).content.decode()
        assert "sk-very-secret" not in page and "remote-secret-token" not in page, url


def test_a_message_page_shows_its_data_and_attachments_escaped(staff_client, chat):
    message = services.send_message(chat=chat, content="<script>alert(1)</script> hello")
    page = staff_client.get(reverse("admin:chats_message_change", args=[message.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert Message.objects.count() == 1


@pytest.mark.needs_postgres
def test_a_common_word_is_found_newest_first_without_gathering_every_match(staff_client, chat, monkeypatch):
    from chats import search

    monkeypatch.setattr(search, "COMMON_WORD_MATCHES", 2)  # so four matches make a common word
    said = [services.send_message(chat=chat, content=f"pelican sighting {i}") for i in range(4)]
    log = services.send_message(chat=chat, content="pelican in a log", kind="log")
    rare = staff_client.get("/admin/chats/message/?q=sighting+3").content.decode()
    assert f">{said[3].pk}<" in rare and f">{said[2].pk}<" not in rare
    common = staff_client.get("/admin/chats/message/?q=pelican").content.decode()
    positions = [common.index(f">{m.pk}<") for m in reversed(said)]
    assert positions == sorted(positions)  # newest first
    assert f">{log.pk}<" not in common  # messages and notes only, as the index holds
    assert "3 messages" in common  # a floor: the probe stops counting there


def test_a_word_that_looks_like_an_id_still_finds_titles(staff_client, user):
    cafe = services.create_chat(owner=user, title="Cafe plans")
    other = services.create_chat(owner=user, title="Other")
    page = staff_client.get("/admin/chats/chat/?q=cafe").content.decode()
    assert "Cafe plans" in page and "Other" not in page.split("result_list")[1]
    by_id = staff_client.get(f"/admin/chats/chat/?q={str(other.pk)[:8]}").content.decode()
    assert ">Other<" in by_id and "Cafe plans" not in by_id
    assert cafe.pk != other.pk
