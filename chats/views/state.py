"""What the chat page is given as JSON: the directory, a chat with its threads, pages of messages.

One builder per shape, shared by the first render (json_script) and the JSON endpoints, so a tab
that navigates or catches up gets exactly what a fresh load would have shown. Message, chat and
run payloads are the event payloads of chats.events: the page merges both with one code path.
"""

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from chats import agent_port, events, selectors, services
from chats.temporary.scope import outside


def agents_for(user):
    return agent_port.agents().agents_usable_by(user=user)


# What agent_payload reads: an agent's prompt, settings and tools stay in the database.
AGENT_PAYLOAD_FIELDS = ("id", "owner", "name", "avatar", "description", "reply_policy")


def agent_payload(agent) -> dict:
    return {"id": agent.pk, "name": agent.name, "avatar": agent.avatar, "description": agent.description,
            "shared": agent.owner_id is None, "reply_policy": agent.reply_policy}


def runs_payload(*, chat, messages=()) -> list[dict]:
    """The runs of these messages and every run of the chat still in flight (one query)."""
    run_ids = {m.run_id for m in messages if m.run_id}
    return [events.run_payload(run) for run in agent_port.agents().runs_in_chat(chat=chat, run_ids=run_ids)]


def thread_key(thread_id) -> str:
    """The page's name for a thread: its id, or "main" for the chat's default thread."""
    return "main" if thread_id is None else str(thread_id)


def thread_summary_payload(summary: selectors.ThreadSummary) -> dict:
    thread, last = summary.thread, summary.last_message
    return {
        "key": thread_key(thread.pk if thread else None),
        "id": thread.pk if thread else None,
        "title": thread.title if thread else "Main thread",
        "created_at": thread.created_at.isoformat() if thread else None,
        "last_activity_at": summary.last_activity.isoformat() if summary.last_activity else None,
        "message_count": summary.message_count,
        "last_message": events.message_payload(last) if last else None,
        "last_question": events.message_payload(summary.last_question) if summary.last_question else None,
    }


def threads_payload(chat) -> list[dict]:
    return [thread_summary_payload(s) for s in selectors.thread_summaries(chat=chat)]


def message_page_payload(*, chat, messages, has_more: bool) -> dict:
    return {
        "messages": [events.message_payload(m) for m in messages],
        "has_more": has_more,
        "runs": runs_payload(chat=chat, messages=messages),
    }


def chat_state(chat) -> dict:
    """A chat as the page opens it: header, members, every thread as a preview, and the newest
    page of the most recently active thread (the page decides, by its clock, whether that thread
    is still fresh enough to continue or the chat opens in New Thread state)."""
    now = timezone.now()
    threads = threads_payload(chat)
    latest = threads[-1] if threads else None
    page = None
    if latest is not None:
        messages, has_more = selectors.message_page(chat=chat, thread_id=latest["id"])
        page = {"thread": latest["key"], **message_page_payload(chat=chat, messages=messages, has_more=has_more)}
    else:
        page = {"thread": None, "messages": [], "has_more": False, "runs": runs_payload(chat=chat)}
    return {
        "chat": events.chat_payload(chat),
        "members": services.members_payload(chat),
        "threads": threads,
        "page": page,
        # Read before the page's messages: a catch-up asks for edits made since then.
        "now": now.isoformat(),
    }


def directory_payload(page: selectors.DirectoryPage) -> dict:
    return {"chats": [events.chat_payload(c) for c in page.chats], "next_cursor": page.next_cursor}


def folders_payload(user) -> list[dict]:
    return [events.folder_payload(f) for f in selectors.folders_for_user(user=user)]


def page_state(request, *, chat=None) -> dict:
    """Everything the page needs at its first paint, so opening it costs one request."""
    user = request.user
    with outside():  # the agents of now, even on a temporary chat's page
        agents = [agent_payload(a) for a in agents_for(user).only(*AGENT_PAYLOAD_FIELDS)]
    return {
        "user": {"id": user.pk, "name": user.get_username()},
        "agents": agents,
        "directory": directory_payload(selectors.directory_page(user=user, limit=50)),
        "folders": folders_payload(user),
        "open": chat_state(chat) if chat is not None else None,
        "limits": {
            "message_chars": settings.HUB_MAX_MESSAGE_CHARS,
            "max_upload_bytes": int(settings.HUB_MAX_UPLOAD_MB * 1024 * 1024),
            "title_chars": settings.HUB_MAX_TITLE_CHARS,
            "trash_days": settings.HUB_TRASH_DAYS,
            "temporary_hours": round(settings.HUB_TEMPORARY_HOURS, 2),
            "page_size": settings.MESSAGE_PAGE_SIZE,
        },
        "urls": {
            "home": reverse("chats:list"),
            "remotes": reverse("agents:remotes"),
            "remote_choices": reverse("agents:remote_choices"),
            "agents": reverse("agents:list"),
            "new_agent": reverse("agents:create"),
            "memory": reverse("chats:memory"),
        },
    }
