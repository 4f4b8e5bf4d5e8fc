"""Share links: the shared page anyone with the link opens, the owner's Shared links page, and the
chat page's JSON endpoints of its Share dialog (make, list, revoke).

The shared page reads nothing but the link's snapshot: not the visitor (no session, no CSRF
token, so a logged-in visitor and a stranger get the same bytes), not the chat, not its owner.
It runs no script that talks to the hub (its Content-Security-Policy allows no connection at
all), asks search engines not to index it, and sends no Referer, so its token never leaves in one.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chats import events, selectors, services
from chats.temporary import chats as temporary_chats
from chats.views.chat_json import hub_json, json_body
from hub import headers
from hub.errors import InvalidInput, NotFound

PAGE_SIZE = 50
NOT_INDEXED = "noindex, nofollow"


def _shared_page_policy() -> str:
    """The hub's policy, with no connection allowed: the page's script only renders what it holds."""
    directives = {**headers.FIXED_DIRECTIVES, "connect-src": ["'none'"]}
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())


def _public(response: HttpResponse) -> HttpResponse:
    response["X-Robots-Tag"] = NOT_INDEXED
    response["Referrer-Policy"] = "no-referrer"
    # Never kept by a browser or a proxy: a revoked link must stop showing at once.
    response["Cache-Control"] = "no-store"
    response[headers.HEADER] = _shared_page_policy()
    return response


def _snapshot_threads(snapshot: dict) -> list[dict]:
    """The snapshot's threads with each message's time parsed for the template."""
    threads = []
    for thread in snapshot.get("threads", []):
        shown = [{**m, "at": parse_datetime(m["created_at"]) if m.get("created_at") else None}
                 for m in thread.get("messages", [])]
        threads.append({"title": thread.get("title", ""), "messages": shown})
    return threads


@require_GET
def shared_chat(request, token):
    """GET /s/<token>/: the snapshot, or the same 404 for a guessed, malformed or revoked token."""
    link = selectors.live_share_by_token(token)
    if link is None:
        body = render_to_string("chats/shared_missing.html")
        return _public(HttpResponse(body, status=404))
    snapshot = link.snapshot or {}
    threads = _snapshot_threads(snapshot)
    body = render_to_string("chats/shared.html", {
        "title": snapshot.get("title") or link.title,
        "description": snapshot.get("description", ""),
        "picture": snapshot.get("picture", ""),
        "shared_at": link.created_at,
        "threads": threads,
        "several_threads": len(threads) > 1,
        "memory": snapshot.get("memory", []),
        "message_count": sum(len(t["messages"]) for t in threads),
    })
    return _public(HttpResponse(body))


# --- The owner's Shared links page -------------------------------------------------------------

def _before_param(request) -> int | None:
    value = request.GET.get("before")
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInput.for_field("before", "must be a share link's id") from None


@login_required
@require_GET
def shared_links(request):
    """Every live share link of the user's chats, newest first, a page at a time."""
    try:
        before = _before_param(request)
    except InvalidInput:
        return redirect("chats:shared_links")
    links, more = selectors.shares_of_user(user=request.user, limit=PAGE_SIZE, before=before)
    return render(request, "chats/shared_links.html", {
        "links": links, "older": links[-1].pk if more and links else None, "paged": before is not None,
    })


def _share_for_page(request, share_id):
    try:
        return selectors.share_for_user(user=request.user, share_id=share_id)
    except NotFound:
        raise Http404("No such share link.") from None


@login_required
@require_POST
def share_revoke(request, share_id):
    """Revoke from the Shared links page (a form), or from the chat's Share dialog (JSON)."""
    if request.content_type == "application/json":
        return _share_revoke_json(request, share_id)
    link = _share_for_page(request, share_id)
    services.revoke_share(link=link)
    messages.success(request, f"Revoked the link to “{link.title}”. It shows nothing from now on.")
    return redirect("chats:shared_links")


@hub_json
def _share_revoke_json(request, share_id):
    link = services.revoke_share(link=selectors.share_for_user(user=request.user, share_id=share_id))
    return JsonResponse({"share": events.share_payload(link)})


# --- The chat page's Share dialog ------------------------------------------------------------------

@require_http_methods(["GET", "POST"])
@hub_json
def chat_shares(request, chat_id):
    """GET: the chat's live links (?before= pages); POST {include_notes, include_memory}: a new one."""
    chat = selectors.chat_for_user(user=request.user, chat_id=chat_id)
    if request.method == "POST":
        body = json_body(request)
        link = services.share_chat(chat=chat, include_notes=body.get("include_notes", False),
                                   include_memory=body.get("include_memory", False))
        return JsonResponse({"share": events.share_payload(link)}, status=201)
    if temporary_chats.is_temporary_chat(chat):
        return JsonResponse({"results": [], "next_cursor": None})  # never shared: it cannot be
    links, more = selectors.shares_of_user(user=request.user, chat=chat, limit=PAGE_SIZE,
                                           before=_before_param(request))
    return JsonResponse({"results": [events.share_payload(link) for link in links],
                         "next_cursor": str(links[-1].pk) if more and links else None})
