"""Pages for the agent registry and provider keys: thin; reads via selectors, writes via services."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents_app import providers, secrets, selectors, services
from agents_app.forms import AgentForm, ProviderKeyForm
from agents_app.usage import report as usage_report
from chats.views.chat_json import hub_json, json_body
from hub.errors import HubError, InvalidInput, NotFound, show_on_form


def _own_agent_or_404(request, agent_id):
    try:
        return selectors.agent_for_user(user=request.user, agent_id=agent_id, own=True)
    except NotFound:
        raise Http404("No such agent.") from None


@login_required
def agent_list(request):
    return render(request, "agents_app/agent_list.html", {"agents": selectors.agents_usable_by(user=request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def agent_create(request):
    form = AgentForm(request.POST or None, initial={"reply_policy": "always", "recovery_policy": "continue"})
    if request.method == "POST" and form.is_valid():
        try:
            agent = services.create_agent(owner=request.user, **form.service_fields())
        except HubError as exc:
            show_on_form(form, exc)
        else:
            messages.success(request, f"{agent.name} is ready; this is its main chat.")
            return redirect("chats:detail", chat_id=agent.main_chat_id)
    status = 400 if request.method == "POST" else 200
    return render(request, "agents_app/agent_form.html", {"form": form, "agent": None}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def agent_edit(request, agent_id):
    agent = _own_agent_or_404(request, agent_id)
    form = AgentForm.for_agent(agent, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.update_agent(agent=agent, **form.service_fields(current_settings=agent.settings))
        except HubError as exc:
            show_on_form(form, exc)
        else:
            messages.success(request, f"Saved {agent.name}.")
            return redirect("agents:list")
    status = 400 if request.method == "POST" else 200
    return render(request, "agents_app/agent_form.html", {"form": form, "agent": agent}, status=status)


@login_required
@require_POST
def agent_delete(request, agent_id):
    agent = _own_agent_or_404(request, agent_id)
    services.delete_agent(agent=agent)
    messages.success(request, f"Deleted {agent.name}. Its past messages stay in your chats.")
    return redirect("agents:list")


@login_required
@require_http_methods(["GET", "POST"])
def provider_keys(request):
    form = ProviderKeyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            secrets.store_key(owner=request.user, **form.cleaned_data)
        except HubError as exc:
            show_on_form(form, exc)
        else:
            messages.success(request, "Key saved. It is stored encrypted and will not be shown again.")
            return redirect("agents:keys")
    keys = request.user.provider_keys.order_by("provider")
    return render(request, "agents_app/provider_keys.html", {"form": form, "keys": keys},
                  status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def provider_key_delete(request, provider):
    secrets.delete_key(owner=request.user, provider=provider)
    messages.success(request, "Key removed.")
    return redirect("agents:keys")


# --- Remotes (MCP tool servers) ---------------------------------------------------------------

@login_required
@require_http_methods(["GET", "POST"])
def remote_list(request):
    from agents_app import remotes
    from agents_app.forms import RemoteForm

    form = RemoteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            remotes.create_remote(owner=request.user, name=form.cleaned_data["name"], url=form.cleaned_data["url"],
                                  headers=form.headers())
        except HubError as exc:
            show_on_form(form, exc)
        else:
            messages.success(request, "Remote added. Attach it to a thread from the chat's composer.")
            return redirect("agents:remotes")
    return render(request, "agents_app/remotes.html", {"form": form, "remotes": request.user.remotes.order_by("name")},
                  status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def remote_delete(request, remote_id):
    from agents_app import remotes

    try:
        remotes.delete_remote(remote=remotes.remote_for_user(user=request.user, remote_id=remote_id))
    except NotFound:
        raise Http404("No such remote.") from None
    return redirect("agents:remotes")


@login_required
@require_POST
def remote_attach(request, remote_id):
    """JSON: attach a remote to a chat's thread (form fields chat_id, thread_id)."""
    from django.http import JsonResponse

    from agents_app import remotes
    from chats import events
    from chats import selectors as chat_selectors

    try:
        remote = remotes.remote_for_user(user=request.user, remote_id=remote_id)
        chat = chat_selectors.chat_for_user(user=request.user, chat_id=request.POST.get("chat_id"))
        thread_id = request.POST.get("thread_id")
        thread = chat_selectors.thread_for_chat(chat=chat, thread_id=thread_id) if thread_id else None
        message = remotes.attach_remote(chat=chat, remote=remote, thread=thread)
    except HubError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse({"message": events.message_payload(message)}, status=201)


@login_required
def remote_choices(request):
    """JSON: the user's remotes (names only; headers are secret)."""
    from django.http import JsonResponse

    return JsonResponse({"remotes": [{"id": r.pk, "name": r.name} for r in request.user.remotes.order_by("name")]})


@require_GET
@hub_json
def model_choices(request):
    """JSON: the models a provider offers ({"models": ["openai:gpt-4o", …], "error"}), for the
    agent form (?provider=&base_url=) or one of the user's agents (?agent=<id>); ?refresh=1 asks
    the provider again instead of the cache."""
    from agents_app import catalog

    if agent_id := request.GET.get("agent"):
        agent = selectors.agent_for_user(user=request.user, agent_id=agent_id, own=True)
        provider, base_url = agent.model.partition(":")[0], agent.base_url
    else:
        provider, base_url = request.GET.get("provider", ""), request.GET.get("base_url", "").strip()
        if base_url:
            providers.validate_agent_model(f"{provider}:any", base_url)
    offer = catalog.offered_models(provider=provider, base_url=base_url, owner_id=request.user.pk,
                                   refresh=request.GET.get("refresh") == "1")
    return JsonResponse({"models": [f"{provider}:{name}" for name in offer.models], "error": offer.error})


@require_POST
@hub_json
def agent_model(request, agent_id):
    """JSON: switch one of the user's agents to another model ({"model": "provider:name"})."""
    agent = selectors.agent_for_user(user=request.user, agent_id=agent_id, own=True)
    model = json_body(request).get("model")
    if not isinstance(model, str):
        raise InvalidInput.for_field("model", "must be text")
    agent = services.update_agent(agent=agent, model=model)
    return JsonResponse({"agent": {"id": agent.pk, "name": agent.name, "model": agent.model}})


@login_required
@require_GET
def usage_page(request):
    """The user's tokens by agent and by day: ?days=N (30 unless given) or ?month=YYYY-MM."""
    error, period = None, None
    try:
        period = usage_report.period_from(days=request.GET.get("days"), month=request.GET.get("month"))
    except InvalidInput as exc:
        error = exc.message
        period = usage_report.period_from()
    report = usage_report.usage_for_user(user=request.user, period=period)
    context = {"report": report, "error": error, "choices": usage_report.period_choices(),
               "chart": usage_report.day_chart(report["by_day"])}
    return render(request, "agents_app/usage.html", context, status=400 if error else 200)
