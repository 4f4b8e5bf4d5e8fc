"""API tokens and invitations in the admin: staff make a token for a user (shown once) and revoke
tokens; they see every invitation and withdraw open ones."""

from django.contrib import admin, messages
from django.utils import timezone

from hub import services
from hub.models import ApiToken, Invitation


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "user__username", "prefix")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        # Never the digest: it is useless to a person, and the token itself is not stored.
        if obj is None:
            return ("user", "name")
        return ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("user", "prefix", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request, obj, form, change):
        if change:
            services.rename_api_token(token=obj, name=obj.name)
            return
        token, raw = services.create_api_token(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.refresh_from_db()
        # Shown once, in this message; only its digest is stored.
        messages.warning(request, f"The token for {obj.user}: {raw} — copy it now, it will not be shown again.")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            services.revoke_api_token(token=token)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s) at {timezone.now():%H:%M:%S}.")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Staff see every invitation and who used it, and can withdraw open ones. Links are made on
    /settings/invitations/, where the link is shown once; the admin never sees a token."""

    list_display = ("prefix", "note", "created_by", "status", "created_at", "expires_at", "used_by", "used_at",
                    "revoked_at")
    list_filter = ("revoked_at", "used_at")
    search_fields = ("note", "prefix", "created_by__username", "used_by__username")
    list_select_related = ("created_by", "used_by")
    fields = ("created_by", "note", "prefix", "status", "created_at", "expires_at", "used_by", "used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="status")
    def status(self, obj):
        return obj.status

    @admin.action(description="Revoke the selected invitations")
    def revoke(self, request, queryset):
        revoked = 0
        for invitation in queryset.filter(revoked_at__isnull=True, used_at__isnull=True):
            services.revoke_invitation(invitation=invitation)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} invitation(s).")
