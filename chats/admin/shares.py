"""The admin of share links: whose chat, when made and revoked, what it holds; staff can revoke
one. The token is a bearer secret (anyone with it reads the chat): only its first characters show."""

from django.contrib import admin

from chats import services
from chats.models import ShareLink
from hub.errors import Conflict
from hub.staff_admin import ReadOnlyDetailMixin, admin_link, run_each, stamp

TOKEN_SHOWN_CHARS = 6


@admin.register(ShareLink)
class ShareLinkAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["title", "chat_link", "owner", "token_prefix", "created_at", "revoked_at", "shows"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "include_notes", "include_memory"]
    list_select_related = ["chat__owner"]
    search_fields = ["title", "chat__title", "chat__owner__username"]
    fields = ["title", "chat_link", "owner", "token_prefix", "include_notes", "include_memory", "created_at",
              "revoked_at", "contents"]
    readonly_fields = fields
    actions = ["revoke_links"]

    def get_queryset(self, request):
        # The snapshot can be large: the list reads none of it.
        return super().get_queryset(request).defer("snapshot")

    @admin.display(description="chat", ordering="chat__title")
    def chat_link(self, link):
        return admin_link(link.chat)

    @admin.display(description="owner", ordering="chat__owner__username")
    def owner(self, link):
        return link.chat.owner.get_username()

    @admin.display(description="token")
    def token_prefix(self, link):
        return f"{link.token[:TOKEN_SHOWN_CHARS]}…"

    @admin.display(description="shows", boolean=True)
    def shows(self, link):
        """Whether the link's page answers: not revoked, and its chat not in the trash."""
        return link.revoked_at is None and link.chat.deleted_at is None

    @admin.display(description="snapshot")
    def contents(self, link):
        snapshot = ShareLink.objects.filter(pk=link.pk).values_list("snapshot", flat=True).first() or {}
        threads = snapshot.get("threads", [])
        count = sum(len(t.get("messages", [])) for t in threads)
        return (f"{count} message(s) in {len(threads)} thread(s); {len(snapshot.get('memory', []))} memory block(s); "
                f"taken {stamp(link.created_at)}")

    @admin.action(description="Revoke (the link's page answers 404 from now on)", permissions=["change"])
    def revoke_links(self, request, queryset):
        def revoke(link):
            if link.revoked_at is not None:
                raise Conflict("already revoked")
            services.revoke_share(link=link)
            return "revoked"

        run_each(self, request, queryset, revoke, verb="Revoke")
