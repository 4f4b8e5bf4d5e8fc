"""The admin of messages: read-only, found by id or by words, and the stuck-reply filter and action."""


from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from chats import agent_port
from chats.models import Message, RatedReply
from chats.search import message_text_filter
from hub.staff_admin import (
    EstimatedCountPaginator,
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


class StuckFilter(admin.SimpleListFilter):
    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("yes", "Streaming with no live run")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(pk__in=agent_port.agents().stuck_streams().values("pk"))
        return queryset


@admin.register(Message)
class MessageAdmin(IdSearchMixin, ObjectActionsMixin, ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["id", "chat_link", "thread", "sender", "kind_label", "status_badge", "short_content", "run_link",
                    "created"]
    list_filter = [StuckFilter, "status", "kind"]
    search_help_text = "A message id, or words of a message or note (each word as a prefix)."
    list_select_related = ["chat", "thread", "sender_agent", "sender_user"]
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    ordering = ["-id"]
    actions = ["settle_stuck"]
    object_actions = ("settle_stuck",)
    fields = ["id", "chat_link", "thread", "sender", "kind_label", "format", "status_badge", "run_link",
              "reply_to_link", "created", "edited_at", "content_block", "data_block", "attachments"]
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        # Words go through the search index (never a scan of every message's text); a number is
        # also a message id.
        condition, count = message_text_filter(term)
        by_id, _ = self.id_condition(queryset, term)
        if by_id is not None:
            condition, count = (by_id | condition if condition is not None else by_id), None
        request.hub_known_count = count
        return (queryset.filter(condition) if condition is not None else queryset.none()), False

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        paginator = super().get_paginator(request, queryset, per_page, orphans, allow_empty_first_page)
        # A common word is counted only up to a floor (see message_text_filter) — but only when no
        # other filter narrowed the list.
        if getattr(request, "hub_known_count", None) and set(request.GET) <= {"q", "p", "o"}:
            paginator.known_count = request.hub_known_count
        return paginator

    def get_search_fields(self, request):
        return ["content"]  # shows the search box; get_search_results uses the full-text index

    def get_object_actions(self, message):
        return ("settle_stuck",) if message.status == Message.Status.STREAMING else ()

    @admin.display(description="created", ordering="id")
    def created(self, message):
        return stamp(message.created_at)

    @admin.display(description="chat", ordering="chat__title")
    def chat_link(self, message):
        return admin_link(message.chat, excerpt(message.chat.title, 40))

    @admin.display(description="sender")
    def sender(self, message):
        if message.sender_agent_id:
            return message.sender_agent.name
        return message.sender_user.get_username() if message.sender_user_id else "user"

    @admin.display(description="kind", ordering="kind")
    def kind_label(self, message):
        return f"{message.kind}/{message.subkind}" if message.subkind else message.kind

    @admin.display(description="status", ordering="status")
    def status_badge(self, message):
        return badge(message.status)

    @admin.display(description="content")
    def short_content(self, message):
        return excerpt(message.content, 80)

    @admin.display(description="run")
    def run_link(self, message):
        if not message.run_id:
            return "—"
        return format_html('<a href="{}">{}</a> (<a href="{}">timeline</a>)',
                           reverse("admin:agents_app_run_change", args=[message.run_id]), str(message.run_id)[:8],
                           reverse("admin:agents_app_run_timeline", args=[message.run_id]))

    @admin.display(description="belongs to reply")
    def reply_to_link(self, message):
        return admin_link(message.reply_to, f"message {message.reply_to_id}") if message.reply_to_id else "—"

    @admin.display(description="content")
    def content_block(self, message):
        return format_html('<pre class="hub-pre">{}</pre>', message.content or "(empty)")

    @admin.display(description="data")
    def data_block(self, message):
        import json

        return format_html('<pre class="hub-pre">{}</pre>', json.dumps(message.data, indent=2, ensure_ascii=False))

    @admin.display(description="reasoning and tool steps")
    def attachments(self, message):
        rows = [(admin_link(m, str(m.pk)), m.subkind, m.created_at.strftime("%H:%M:%S"), excerpt(m.content, 120))
                for m in message.attachments.order_by("id")[:50]]
        return html_table(("id", "kind", "time", "content"), rows)

    @admin.action(description="Settle as interrupted (streaming with no live run)", permissions=["change"])
    def settle_stuck(self, request, queryset):
        run_each(self, request, queryset, lambda message: agent_port.agents().settle_stuck_message(message=message),
                 verb="Settle as interrupted")


class RatingFilter(admin.SimpleListFilter):
    title = "rating"
    parameter_name = "rating"

    def lookups(self, request, model_admin):
        return [("up", "Thumbs up"), ("down", "Thumbs down")]

    def queryset(self, request, queryset):
        if self.value() in ("up", "down"):
            return queryset.filter(data__feedback__rating=self.value())
        return queryset


@admin.register(RatedReply)
class RatedReplyAdmin(admin.ModelAdmin):
    """The replies users rated, newest first: what they liked and what they did not."""

    list_display = ["id", "rating", "agent", "chat_link", "reply", "rated"]
    list_filter = [RatingFilter]
    list_select_related = ["chat", "sender_agent"]
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering = ["-id"]

    def get_queryset(self, request):
        return super().get_queryset(request).filter(data__has_key="feedback")  # the message_rated index

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="rating")
    def rating(self, message):
        rating = (message.data.get("feedback") or {}).get("rating")
        return badge("thumbs up" if rating == "up" else "thumbs down")

    @admin.display(description="agent")
    def agent(self, message):
        return message.sender_agent.name if message.sender_agent_id else "—"

    @admin.display(description="chat")
    def chat_link(self, message):
        return admin_link(message.chat, excerpt(message.chat.title, 40))

    @admin.display(description="reply")
    def reply(self, message):
        return admin_link(Message(pk=message.pk), excerpt(message.content, 100))

    @admin.display(description="rated")
    def rated(self, message):
        return (message.data.get("feedback") or {}).get("at", "")[:16].replace("T", " ")
