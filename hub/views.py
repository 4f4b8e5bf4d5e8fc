"""The API tokens page (/settings/tokens/): make a token (shown once), see and revoke yours."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from hub import selectors, services
from hub.errors import HubError, NotFound, show_on_form


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “backup script”.")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request):
    form = TokenForm(request.POST or None)
    new_token = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                token, new_token = services.create_api_token(user=request.user, name=form.cleaned_data["name"])
            except HubError as exc:
                show_on_form(form, exc)
                status = 400
            else:
                form = TokenForm()
        else:
            status = 400
    # The new token is rendered in this one answer only (never_cache); it is not kept anywhere.
    return render(request, "hub/api_tokens.html", {
        "form": form, "new_token": new_token, "tokens": selectors.tokens_of(user=request.user),
        "api_base": request.build_absolute_uri("/api/v1/"),
    }, status=status)


@login_required
@require_POST
def api_token_revoke(request, token_id):
    try:
        token = selectors.token_for_user(user=request.user, token_id=token_id)
    except NotFound:
        raise Http404("No such token.") from None
    services.revoke_api_token(token=token)
    messages.success(request, f"Revoked “{token.name}”. Programs using it are refused from now on.")
    return redirect("api_tokens")
