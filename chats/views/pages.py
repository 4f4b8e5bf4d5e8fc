"""Pages: the chat page (directory and open chat), sign-up, memory. Thin: selectors read, services write."""

from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from chats import selectors, services
from chats.forms import ChatForm, SignupForm
from chats.views import chat_json, state
from hub import selectors as hub_selectors
from hub import services as hub_services
from hub import throttle
from hub.errors import HubError, NotFound, show_on_form


def _chat_or_404(request, chat_id):
    try:
        return selectors.chat_for_user(user=request.user, chat_id=chat_id)
    except NotFound:
        raise Http404("No such chat.") from None


@require_http_methods(["GET", "POST"])
def signup(request):
    """Open while hub.selectors.signup_is_open(), else only with an invitation link (?invite=)."""
    if request.user.is_authenticated:
        return redirect("chats:list")
    invite = request.GET.get("invite", "")
    if not hub_selectors.signup_is_open():
        problem = hub_selectors.invitation_problem(hub_selectors.invitation_by_token(invite)) if invite else None
        if not invite or problem:
            return _signup_closed(request, problem)
    form = SignupForm(request.POST or None)
    if request.method != "POST":
        return render(request, "registration/signup.html", {"form": form, "invited": bool(invite)})
    address = throttle.client_address(request)
    wait = throttle.SIGNUP_BY_ADDRESS.seconds_locked(address)
    if wait:
        form.add_error(None, f"Too many sign-ups from your address. Try again in {throttle.describe_wait(wait)}.")
        response = render(request, "registration/signup.html", {"form": form, "invited": bool(invite)}, status=429)
        response["Retry-After"] = str(wait)
        return response
    throttle.SIGNUP_BY_ADDRESS.record(address)
    if form.is_valid():
        try:
            user = hub_services.sign_up(username=form.cleaned_data["username"],
                                        password=form.cleaned_data["password1"], invitation_token=invite)
        except (hub_services.SignupClosed, hub_services.InvitationNotUsable) as exc:
            return _signup_closed(request, exc.message)  # used or withdrawn while the form was open
        except HubError as exc:
            show_on_form(form, exc)
        else:
            login(request, user)
            return redirect("chats:list")
    return render(request, "registration/signup.html", {"form": form, "invited": bool(invite)}, status=400)


def _signup_closed(request, problem):
    return render(request, "registration/signup_closed.html", {"problem": problem}, status=403)


def _new_chat_form(request, data=None):
    agents = state.agents_for(request.user)
    # A new chat starts with the built-in Librarian, so a fresh hub is useful with no key.
    return ChatForm(data, agents_queryset=agents, initial={"agents": agents.filter(model="builtin:librarian")})


def _hub_page(request, *, chat=None, form=None, status=200):
    """The one chat page: the directory, and the open chat or the new-chat state."""
    initial = state.page_state(request, chat=chat)
    context = {"chat": chat, "form": form or _new_chat_form(request), "initial": initial,
               "directory_chats": initial["directory"]["chats"]}
    return render(request, "chats/hub.html", context, status=status)


@login_required
@require_GET
def chat_list(request):
    return _hub_page(request)


@login_required
@require_http_methods(["POST"])
def chat_create(request):
    """Create a chat from the new-chat form; a JSON body answers JSON (the page's own way)."""
    if request.content_type == "application/json":
        return chat_json.chat_create(request)
    form = _new_chat_form(request, request.POST)
    if form.is_valid():
        try:
            chat = services.create_chat(owner=request.user, **form.cleaned_data)
        except HubError as exc:
            show_on_form(form, exc)
        else:
            return redirect("chats:detail", chat_id=chat.pk)
    return _hub_page(request, form=form, status=400)


@login_required
@require_GET
def chat_detail(request, chat_id):
    return _hub_page(request, chat=_chat_or_404(request, chat_id))


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
                show_on_form(form, exc)
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
