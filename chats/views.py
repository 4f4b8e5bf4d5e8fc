"""Pages: thin; they read through selectors and write through services."""

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from chats import events, selectors, services
from chats.forms import ChatForm, SignupForm
from hub.errors import HubError, NotFound


def _agents_for(user):
    # Imported here so chats depends on agents_app only at the page level, never in its core.
    from agents_app.selectors import agents_usable_by

    return agents_usable_by(user=user)


def _chat_or_404(request, chat_id):
    try:
        return selectors.chat_for_user(user=request.user, chat_id=chat_id)
    except NotFound:
        raise Http404("No such chat.") from None


@require_http_methods(["GET", "POST"])
def signup(request):
    if not settings.HUB_ALLOW_SIGNUP:
        raise Http404("Sign-up is turned off on this hub.")
    if request.user.is_authenticated:
        return redirect("chats:list")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        return redirect("chats:list")
    return render(request, "registration/signup.html", {"form": form})


@login_required
@require_GET
def chat_list(request):
    agents = _agents_for(request.user)
    # A new chat starts with the built-in Librarian, so a fresh hub is useful with no key.
    form = ChatForm(agents_queryset=agents, initial={"agents": agents.filter(model="builtin:librarian")})
    chats = selectors.chats_for_user(user=request.user)[:200]
    return render(request, "chats/chat_list.html", {"chats": chats, "form": form})


@login_required
@require_http_methods(["POST"])
def chat_create(request):
    form = ChatForm(request.POST, agents_queryset=_agents_for(request.user))
    if form.is_valid():
        try:
            chat = services.create_chat(owner=request.user, **form.cleaned_data)
        except HubError as exc:
            for name, problems in exc.fields.items():
                for problem in problems:
                    form.add_error(name if name in form.fields else None, problem)
        else:
            return redirect("chats:detail", chat_id=chat.pk)
    chats = selectors.chats_for_user(user=request.user)[:200]
    return render(request, "chats/chat_list.html", {"chats": chats, "form": form}, status=400)


@login_required
@require_GET
def chat_detail(request, chat_id):
    chat = _chat_or_404(request, chat_id)
    view = selectors.chat_view(chat=chat)
    initial = {
        "chat": events.chat_payload(chat),
        "messages": [events.message_payload(m) for m in view.messages],
        "has_more": view.has_more,
        "members": services.members_payload(chat),
    }
    return render(request, "chats/chat_detail.html", {"chat": chat, "view": view, "initial": initial})


@login_required
@require_GET
def chat_messages(request, chat_id):
    """JSON pages of a chat's messages: ?before=<id> pages back, ?after=<id> catches up."""
    chat = _chat_or_404(request, chat_id)
    try:
        before = int(request.GET["before"]) if "before" in request.GET else None
        after = int(request.GET["after"]) if "after" in request.GET else None
    except ValueError:
        return JsonResponse(
            {"error": {"code": "invalid", "message": "before and after must be message ids", "fields": {}}},
            status=400,
        )
    messages, has_more = selectors.message_page(chat=chat, before_id=before, after_id=after)
    return JsonResponse({"messages": [events.message_payload(m) for m in messages], "has_more": has_more})


def not_found(request, exception=None):
    args = getattr(exception, "args", ())
    message = args[0] if args and isinstance(args[0], str) else ""
    return render(request, "404.html", {"message": message}, status=404)


# --- Shared memory ----------------------------------------------------------------------------

@login_required
@require_http_methods(["GET", "POST"])
def memory_page(request):
    """Read and edit the user's memory blocks; each entry links to the chat it came from."""
    from chats import memory
    from chats.forms import MemoryBlockForm

    form = MemoryBlockForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                memory.set_content(owner=request.user, **form.cleaned_data)
            except HubError as exc:
                for name, problems in exc.fields.items():
                    for problem in problems:
                        form.add_error(name if name in form.fields else None, problem)
            else:
                return redirect("chats:memory")
        status = 400
    blocks = memory.blocks_for(owner=request.user).prefetch_related("entries__chat", "entries__agent")
    return render(request, "memory/memory.html", {"blocks": blocks, "form": form}, status=status)


@login_required
@require_http_methods(["POST"])
def memory_entry_delete(request, entry_id):
    from chats import memory

    try:
        memory.delete_entry(owner=request.user, entry_id=entry_id)
    except NotFound:
        raise Http404("No such memory entry.") from None
    return redirect("chats:memory")
