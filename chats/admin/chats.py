"""The admin of chats (a chat with its threads, members, latest messages and runs), threads and
members. A chat's title, description and picture are edited through chats.services.update_chat."""

from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.db.models import Count, Prefetch, Q
from django.urls import reverse
from django.utils.html import format_html

from chats import services as chat_services
from chats.admin.inlines import ReadOnlyInline
from chats.models import Chat, Membership, Message, Thread
from chats.services.chats import trash_cutoff
from chats.temporary import chats as temporary_chats
from hub.errors import Conflict
from hub.staff_admin import (
    IdSearchMixin,
    ObjectActionsMixin,
    ReadOnlyDetailMixin,
    admin_link,
    badge,
    excerpt,
    html_table,
    run_each,
    stamp,
)


class MembershipInline(ReadOnlyInline):
    model = Membership
    fields = ["agent", "agent_state", "added_at"]
    readonly_fields = ["agent", "agent_state", "added_at"]
    verbose_name_plural = "members"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent")

    @admin.display(description="state")
    def agent_state(self, membership):
        return badge("deleted") if membership.agent.deleted_at else "active"


class ThreadInline(ReadOnlyInline):
    model = Thread
    fields = ["title", "created_at", "last_activity_at"]
    readonly_fields = fields


class TrashFilter(admin.SimpleListFilter):
    title = "trash"
    parameter_name = "trash"

    def lookups(self, request, model_admin):
        return [("live", "Live"), ("trash", "In the trash"), ("expired", f"Past {settings.HUB_TRASH_DAYS} days")]

    def queryset(self, request, queryset):
        if self.value() == "live":
            return queryset.filter(deleted_at__isnull=True)
        if self.value() == "trash":
            return queryset.filter(deleted_at__gte=trash_cutoff())
        if self.value() == "expired":
            return queryset.filter(deleted_at__lt=trash_cutoff())
        return queryset


class ArchiveFilter(admin.SimpleListFilter):
    title = "archive"
    parameter_name = "archived"

    def lookups(self, request, model_admin):
        return [("yes", "Archived"), ("no", "Not archived"), ("pinned", "Pinned")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(archived_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(archived_at__isnull=True)
        if self.value() == "pinned":
            return queryset.filter(pinned_at__isnull=False)
        return queryset


@admin.register(Chat)
class ChatAdmin(IdSearchMixin, ObjectActionsMixin, admin.ModelAdmin):
    list_display = ["title", "owner", "members", "updated", "preview", "state", "created"]
    list_filter = [TrashFilter, ArchiveFilter, ("forked_from", admin.EmptyFieldListFilter)]
    search_fields = ["title", "description", "owner__username"]
    search_help_text = "A title, a description, the owner's username, or a chat id (its first 8 characters)."
    list_select_related = ["owner"]
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering = ["-updated_at"]
    fields = ["id", "owner", "title", "description", "picture", "state", "kept", "created", "updated",
              "last_message_preview", "forked_from_link", "counts", "latest_messages", "recent_runs"]
    readonly_fields = ["id", "owner", "state", "kept", "created", "updated", "last_message_preview",
                       "forked_from_link", "counts", "latest_messages", "recent_runs"]
    inlines = [MembershipInline, ThreadInline]
    actions = ["restore_chats", "purge_chats", "trash_chats", "archive_chats", "unarchive_chats", "unpin_chats"]
    object_actions = ("restore_chats", "purge_chats", "trash_chats", "archive_chats", "unarchive_chats", "unpin_chats")

    def get_queryset(self, request):
        members = Prefetch("memberships", queryset=Membership.objects.select_related("agent").order_by("added_at"))
        return super().get_queryset(request).prefetch_related(members)

    def has_add_permission(self, request):
        return False  # users make chats; staff repair them

    def changelist_view(self, request, extra_context=None):
        # Temporary chats have no rows (chats.temporary): only how many there are is shown.
        extra_context = {**(extra_context or {}), "temporary_chats": len(temporary_chats.live_chats())}
        return super().changelist_view(request, extra_context)

    def has_delete_permission(self, request, obj=None):
        return False  # the trash and purge actions, which keep the rules of the trash

    def save_model(self, request, obj, form, change):
        chat_services.update_chat(chat=obj, title=form.cleaned_data["title"],
                                  description=form.cleaned_data["description"], picture=form.cleaned_data["picture"])

    def get_object_actions(self, chat):
        if chat.deleted_at:
            return ("restore_chats", "purge_chats")
        kept = ("unarchive_chats",) if chat.archived_at else ("archive_chats",)
        return ("trash_chats", *kept, *(("unpin_chats",) if chat.pinned_at else ()))

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, chat):
        return stamp(chat.updated_at)

    @admin.display(description="created", ordering="created_at")
    def created(self, chat):
        return stamp(chat.created_at)

    @admin.display(description="members")
    def members(self, chat):
        return ", ".join(m.agent.name for m in chat.memberships.all()) or "—"

    @admin.display(description="preview")
    def preview(self, chat):
        return excerpt(chat.last_message_preview, 60)

    @admin.display(description="state", ordering="deleted_at")
    def state(self, chat):
        if chat.deleted_at is None:
            return "live"
        purge = chat.deleted_at + timedelta(days=settings.HUB_TRASH_DAYS)
        return format_html("{} since {}, purged after {}", badge("in trash"), f"{chat.deleted_at:%Y-%m-%d %H:%M}",
                           f"{purge:%Y-%m-%d}")

    @admin.display(description="kept")
    def kept(self, chat):
        """Pinned, archived, its folder and tags (the owner's order of their chats)."""
        parts = [f"pinned {stamp(chat.pinned_at)}" if chat.pinned_at else "not pinned",
                 f"archived {stamp(chat.archived_at)}" if chat.archived_at else "not archived"]
        folder = admin_link(chat.folder) if chat.folder_id else "no folder"
        tags = ", ".join(t.name for t in chat.tags.all()) or "no tags"
        return format_html("{}; {}; in {}; tags: {}", parts[0], parts[1], folder, tags)

    @admin.display(description="forked from")
    def forked_from_link(self, chat):
        return admin_link(chat.forked_from) if chat.forked_from_id else "—"

    @admin.display(description="counts")
    def counts(self, chat):
        counted = {f"kind_{k}": Count("id", filter=Q(kind=k)) for k in Message.Kind.values}
        counts = chat.messages.aggregate(**counted, streaming=Count("id", filter=Q(status=Message.Status.STREAMING)))
        by_kind = {k: counts[f"kind_{k}"] for k in Message.Kind.values}
        streaming = counts["streaming"]
        url = reverse("admin:chats_message_changelist") + f"?chat__id__exact={chat.pk}"
        return format_html('<a href="{}">{} messages</a>, {} logs, {} notes, {} resources; {} streaming now',
                           url, by_kind["message"], by_kind["log"], by_kind["note"], by_kind["resource"], streaming)

    @admin.display(description="latest 30 messages")
    def latest_messages(self, chat):
        rows = []
        for m in chat.messages.select_related("sender_agent", "thread").order_by("-id")[:30]:
            sender = m.sender_agent.name if m.sender_agent_id else "user"
            kind = f"{m.kind}/{m.subkind}" if m.subkind else m.kind
            run = (format_html('<a href="{}">{}</a>', reverse("admin:agents_app_run_timeline", args=[m.run_id]),
                               str(m.run_id)[:8]) if m.run_id else "—")
            rows.append((admin_link(m, str(m.pk)), stamp(m.created_at),
                         m.thread.title if m.thread_id else "main", sender, kind, badge(m.status), run,
                         excerpt(m.content, 100)))
        return html_table(("id", "time", "thread", "sender", "kind", "status", "run", "content"), rows)

    @admin.display(description="latest 20 runs")
    def recent_runs(self, chat):
        rows = [(format_html('<a href="{}">{}</a>', reverse("admin:agents_app_run_change", args=[r.pk]),
                             str(r.pk)[:8]), badge(r.status), r.kind, r.agent.name, r.attempt,
                 stamp(r.created_at), excerpt(r.error, 60))
                for r in chat.runs.select_related("agent").defer("checkpoint").order_by("-created_at")[:20]]
        return html_table(("run", "status", "kind", "agent", "attempt", "created", "error"), rows)

    @admin.action(description="Restore from the trash", permissions=["change"])
    def restore_chats(self, request, queryset):
        def restore(chat):
            if chat.deleted_at is None:
                raise Conflict("not in the trash")
            chat_services.restore_chat(chat=chat)
            return "restored with its members"

        run_each(self, request, queryset, restore, verb="Restore")

    @admin.action(description="Purge for good (chats in the trash only)", permissions=["change"])
    def purge_chats(self, request, queryset):
        def purge(chat):
            chat_services.purge_chat(chat=chat)
            return "purged"

        run_each(self, request, queryset, purge, verb="Purge", log_deletion=True)

    purge_chats.confirm = "Purge this chat for good? Its threads, messages and runs go with it."

    @admin.action(description="Move to the trash", permissions=["change"])
    def trash_chats(self, request, queryset):
        def trash(chat):
            if chat.deleted_at is not None:
                raise Conflict("already in the trash")
            chat_services.delete_chat(chat=chat)
            return "moved to the trash; its open tabs were closed"

        run_each(self, request, queryset, trash, verb="Move to the trash")

    trash_chats.confirm = "Move this chat to the trash? Its owner can restore it."

    @admin.action(description="Archive (out of the owner's list, still searchable)", permissions=["change"])
    def archive_chats(self, request, queryset):
        def archive(chat):
            if chat.archived_at is not None or chat.deleted_at is not None:
                raise Conflict("already archived, or in the trash")
            chat_services.archive_chat(chat=chat)
            return "archived"

        run_each(self, request, queryset, archive, verb="Archive")

    @admin.action(description="Restore from the archive", permissions=["change"])
    def unarchive_chats(self, request, queryset):
        def unarchive(chat):
            if chat.archived_at is None:
                raise Conflict("not archived")
            chat_services.archive_chat(chat=chat, archived=False)
            return "back in the owner's list"

        run_each(self, request, queryset, unarchive, verb="Restore from the archive")

    @admin.action(description="Unpin", permissions=["change"])
    def unpin_chats(self, request, queryset):
        def unpin(chat):
            if chat.pinned_at is None:
                raise Conflict("not pinned")
            chat_services.pin_chat(chat=chat, pinned=False)
            return "unpinned"

        run_each(self, request, queryset, unpin, verb="Unpin")


@admin.register(Thread)
class ThreadAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["title", "chat", "created_at", "last_activity_at"]
    search_fields = ["title", "chat__title"]
    list_select_related = ["chat"]
    show_full_result_count = False


class DeletedAgentFilter(admin.SimpleListFilter):
    title = "agent"
    parameter_name = "agent_state"

    def lookups(self, request, model_admin):
        return [("deleted", "Deleted agents"), ("active", "Active agents")]

    def queryset(self, request, queryset):
        if self.value() == "deleted":
            return queryset.filter(agent__deleted_at__isnull=False)
        if self.value() == "active":
            return queryset.filter(agent__deleted_at__isnull=True)
        return queryset


@admin.register(Membership)
class MembershipAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["chat", "agent", "agent_state", "added_at"]
    list_filter = [DeletedAgentFilter]
    search_fields = ["chat__title", "agent__name"]
    list_select_related = ["chat", "agent"]
    actions = ["remove_members"]
    show_full_result_count = False

    @admin.display(description="agent state")
    def agent_state(self, membership):
        return badge("deleted") if membership.agent.deleted_at else "active"

    @admin.action(description="Remove from the chat", permissions=["change"])
    def remove_members(self, request, queryset):
        def remove(membership):
            chat_services.remove_member(chat=membership.chat, agent=membership.agent)
            return "removed"

        run_each(self, request, queryset.select_related("chat", "agent"), remove, verb="Remove member",
                 log_deletion=True)
