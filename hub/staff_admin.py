"""What every Hub admin page shares: id search that uses the primary key's index, read-only detail
pages whose actions call services, buttons on a detail page that run an action on that one
object, status badges and small HTML tables.

Admin actions are thin: each calls a service per object, says what it did (message_user) and
records a LogEntry for each object it changed.
"""

import re
import uuid

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.core.paginator import Paginator
from django.db import connection, transaction
from django.db.models import Q
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from hub.errors import HubError

BADGE_TONES = {
    # Calm for the normal, loud for what needs a look. The colours are classes in
    # static/css/hub-admin.css: the admin's Content-Security-Policy allows no inline style.
    "succeeded": "ok", "final": "ok", "live": "ok",
    "queued": "quiet", "running": "busy", "streaming": "busy",
    "recovered": "warn", "interrupted": "warn", "silent": "silent",
    "cancelled": "quiet", "stopped": "quiet",
    "failed": "bad", "error": "bad", "deleted": "bad",
    "thumbs up": "ok", "thumbs down": "bad",
}


def badge(text: str):
    tone = BADGE_TONES.get(text, "quiet")
    return format_html('<span class="hub-badge hub-badge-{}">{}</span>', tone, text)


def excerpt(text: str, size: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= size else text[: size - 1] + "…"


def stamp(moment) -> str:
    """A time to the second, the way support reads logs (the admin's default drops the seconds)."""
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "—"


def admin_link(obj, text=None):
    if obj is None:
        return "—"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


def html_table(header, rows):
    """A small read-only table for a detail page; every cell is escaped unless it is safe HTML."""
    if not rows:
        return "—"
    head = format_html_join("", "<th>{}</th>", ((h,) for h in header))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((c,) for c in row)),) for row in rows)
    )
    return format_html('<table class="hub-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, body)


def uuid_prefix_range(term: str):
    """(low, high) UUIDs covering every id that starts with these hex digits, or None.

    A range on the primary key uses its index, where a text LIKE on the id would read every row.
    """
    digits = term.replace("-", "").lower()
    if not 4 <= len(digits) <= 32 or not re.fullmatch(r"[0-9a-f]+", digits):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


class EstimatedCountPaginator(Paginator):
    """Counting every row of a table of millions takes PostgreSQL a while on each page; unfiltered,
    the planner's estimate is enough to page by (filtered lists are counted exactly)."""

    ESTIMATE_ABOVE = 100_000
    known_count: int | None = None  # a count the admin already has (a common word's floor)

    @cached_property
    def count(self):
        if self.known_count is not None:
            return self.known_count
        query = getattr(self.object_list, "query", None)
        if connection.vendor == "postgresql" and query is not None and not query.where:
            with connection.cursor() as cursor:
                cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                               [self.object_list.model._meta.db_table])
                row = cursor.fetchone()
            if row and row[0] > self.ESTIMATE_ABOVE:
                return row[0]
        return super().count


class IdSearchMixin:
    """A search term that looks like an id (a number, or the first hex digits of a UUID) finds that
    row through the primary key. Eight hex digits or more (the short ids the admin shows) are taken
    as an id only; a shorter one may be a word as well ("cafe"), so search_fields are asked too."""

    ID_ONLY_DIGITS = 8

    def id_condition(self, queryset, term: str) -> tuple[Q | None, bool]:
        """(condition, whether it is the whole search)."""
        pk_field = queryset.model._meta.pk
        if pk_field.get_internal_type() == "UUIDField":
            bounds = uuid_prefix_range(term)
            if bounds is None:
                return None, False
            return Q(pk__gte=bounds[0], pk__lte=bounds[1]), len(term.replace("-", "")) >= self.ID_ONLY_DIGITS
        if term.isdigit() and pk_field.get_internal_type() in ("AutoField", "BigAutoField"):
            return Q(pk=int(term)), False
        return None, False

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        by_id, only = self.id_condition(queryset, term) if term else (None, False)
        if only:
            return queryset.filter(by_id), False
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if by_id is None:
            return found, duplicates
        return queryset.filter(by_id) | found, duplicates


class ReadOnlyDetailMixin:
    """Rows written only by services: no add, no edit form, no delete; actions do the changing.

    The change permission still governs the actions (has_change_permission without an object).
    """

    def has_add_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        if obj is not None:
            return False
        return super().has_change_permission(request)


class ObjectActionsMixin:
    """Buttons on a detail page (object_actions: action names) that POST to <id>/act/<name>/ and run
    that admin action on the one object, then come back to the page."""

    object_actions: tuple[str, ...] = ()

    def get_urls(self):
        opts = self.model._meta
        extra = [
            path("<path:object_id>/act/<str:action>/", self.admin_site.admin_view(self.object_action_view),
                 name=f"{opts.app_label}_{opts.model_name}_act"),
        ]
        return extra + super().get_urls()

    def object_action_view(self, request, object_id, action):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if action not in self.object_actions:
            raise Http404("no such action")
        func, _name, _description = self.get_action(action)
        allowed = getattr(func, "allowed_permissions", ())
        if any(not getattr(self, f"has_{p}_permission")(request) for p in allowed):
            raise Http404("no such action")
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404("no such object")
        func(self, request, self.get_queryset(request).filter(pk=obj.pk))
        opts = self.model._meta
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))

    def get_object_actions(self, obj) -> tuple[str, ...]:
        """The actions that make sense for this object now (all of them unless a model says)."""
        return self.object_actions

    def object_action_buttons(self, obj):
        opts = self.model._meta
        buttons = []
        for name in self.get_object_actions(obj):
            func, _name, description = self.get_action(name)
            buttons.append({
                "url": reverse(f"admin:{opts.app_label}_{opts.model_name}_act", args=[obj.pk, name]),
                "label": description, "confirm": getattr(func, "confirm", ""),
            })
        return buttons

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        # The page's object is at hand here (change_view would have to fetch it again).
        if obj is not None and self.has_change_permission(request):
            context["object_action_buttons"] = self.object_action_buttons(obj)
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)


def run_each(modeladmin, request, queryset, service, *, verb: str, log_deletion: bool = False):
    """Call service(obj) for each object; say what happened; record a LogEntry for each change.

    service returns a sentence of what it did, or raises HubError saying why not.
    """
    done, refused = [], []
    for obj in queryset:
        label = str(obj)
        try:
            if log_deletion:
                # Recorded before the row is gone; the purge and the entry commit together.
                with transaction.atomic():
                    LogEntry.objects.log_actions(request.user.pk, [obj], DELETION, change_message=verb,
                                                 single_object=True)
                    outcome = service(obj)
            else:
                outcome = service(obj)
                LogEntry.objects.log_actions(request.user.pk, [obj], CHANGE,
                                             change_message=f"{verb}: {outcome}", single_object=True)
        except HubError as exc:
            refused.append(f"{label}: {exc.message}")
            continue
        done.append(f"{label}: {outcome}")
    if done:
        modeladmin.message_user(request, f"{verb} — {len(done)} done. " + " · ".join(done[:10])
                                + (" …" if len(done) > 10 else ""), messages.SUCCESS)
    if refused:
        modeladmin.message_user(request, f"{verb} — {len(refused)} not done. " + " · ".join(refused[:10])
                                + (" …" if len(refused) > 10 else ""), messages.WARNING)
    if not done and not refused:
        modeladmin.message_user(request, f"{verb}: nothing selected.", messages.INFO)


admin.site.site_header = "Hub administration"
admin.site.site_title = "Hub admin"
admin.site.index_title = "Inspect and repair"
