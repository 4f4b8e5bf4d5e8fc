"""The hub's own pages: the log-in page behind the throttle, API tokens (/settings/tokens/) and
invitation links (/settings/invitations/). A token or a link is shown once, when it is made."""

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from hub import selectors, services, throttle
from hub.errors import HubError, NotFound, show_on_form


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's log-in form, with failed log-ins counted per username and per client address.

    While either is locked the form refuses before checking the password, a correct one too; a
    success clears the username's count but not the address's (one good account must not let an
    address guess at others). `seconds_locked` is how long the refusal lasts.
    """

    seconds_locked = 0

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # a missing field is the form's own error, not a guess
        keys = [(throttle.LOGIN_BY_USERNAME, throttle.username_key(username)),
                (throttle.LOGIN_BY_ADDRESS, throttle.client_address(self.request))]
        self.seconds_locked = max(rule.seconds_locked(key) for rule, key in keys)
        if self.seconds_locked:
            raise self._locked_error()
        try:
            cleaned = super().clean()
        except ValidationError:
            self.seconds_locked = max(rule.record(key) for rule, key in keys)
            if self.seconds_locked:
                raise self._locked_error() from None
            raise
        throttle.LOGIN_BY_USERNAME.reset(throttle.username_key(username))
        return cleaned

    def _locked_error(self) -> ValidationError:
        return ValidationError(
            f"Too many failed log-ins. Try again in {throttle.describe_wait(self.seconds_locked)}.",
            code="throttled")


class HubLoginView(LoginView):
    """/login/ for everyone, staff too (the admin's log-in page sends them here)."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return super().get_context_data(signup_open=selectors.signup_is_open(), **kwargs)

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.seconds_locked:
            response.status_code = 429
            response["Retry-After"] = str(form.seconds_locked)
        return response


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


class InvitationForm(forms.Form):
    note = forms.CharField(max_length=100, required=False,
                           help_text="Who it is for, to tell your links apart (only you and staff see it).")


def _invitations_page(request, *, form, new_link=None, status=200):
    return render(request, "hub/invitations.html", {
        "form": form, "new_link": new_link, "invitations": selectors.invitations_of(user=request.user),
        "days": settings.HUB_INVITATION_DAYS,
    }, status=status)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def invitations(request):
    if not selectors.can_invite(request.user):
        raise Http404("No such page.")
    form = InvitationForm(request.POST or None)
    if request.method != "POST":
        return _invitations_page(request, form=form)
    if not form.is_valid():
        return _invitations_page(request, form=form, status=400)
    try:
        _, raw = services.create_invitation(user=request.user, note=form.cleaned_data["note"])
    except HubError as exc:
        show_on_form(form, exc)
        return _invitations_page(request, form=form, status=400)
    # The link is rendered in this one answer only (never_cache); it is not kept anywhere.
    link = request.build_absolute_uri(reverse("signup") + "?" + urlencode({"invite": raw}))
    return _invitations_page(request, form=InvitationForm(), new_link=link)


@login_required
@require_POST
def invitation_revoke(request, invitation_id):
    try:
        invitation = selectors.invitation_for_user(user=request.user, invitation_id=invitation_id)
    except NotFound:
        raise Http404("No such invitation.") from None
    services.revoke_invitation(invitation=invitation)
    if invitation.revoked_at:
        messages.success(request, f"Withdrew the invitation {invitation.prefix}…; its link no longer works.")
    else:
        messages.info(request, f"The invitation {invitation.prefix}… was already used; there is nothing to withdraw.")
    return redirect("invitations")
