"""The admin of folders and tags: whose, how many chats, a folder's instructions (edited through
chats.services.update_folder); staff delete a folder (its chats stay) or a tag (taken off its
chats) through the services, so every tab of the owner hears of it."""

from django import forms
from django.contrib import admin
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html

from chats import services
from chats.models import Folder, Tag
from chats.services import organize
from hub.errors import InvalidInput
from hub.staff_admin import ObjectActionsMixin, excerpt, run_each, stamp


def chats_link(obj, filter_name: str, count: int):
    url = reverse("admin:chats_chat_changelist") + f"?{filter_name}={obj.pk}"
    return format_html('<a href="{}">{} chat(s)</a>', url, count)


class FolderForm(forms.ModelForm):
    """The service's own checks, before saving: a clash or a too-long text shows on its field."""

    class Meta:
        model = Folder
        fields = ["name", "instructions"]

    def clean(self):
        cleaned = super().clean()
        try:
            name = organize.clean_folder_name(cleaned.get("name", ""))
            if name.lower() != self.instance.name.lower():
                organize.check_folder_name_free(owner_id=self.instance.owner_id, name=name, folder=self.instance)
            organize.clean_folder_instructions(cleaned.get("instructions", ""))
        except InvalidInput as exc:
            for field, problems in exc.fields.items():
                self.add_error(field if field in self.fields else None, problems)
        return cleaned


@admin.register(Folder)
class FolderAdmin(ObjectActionsMixin, admin.ModelAdmin):
    form = FolderForm
    list_display = ["name", "owner", "chat_count", "instructions_excerpt", "created"]
    list_select_related = ["owner"]
    search_fields = ["name", "instructions", "owner__username"]
    fields = ["owner", "name", "instructions", "created", "chats"]
    readonly_fields = ["owner", "created", "chats"]
    actions = ["delete_folders"]
    object_actions = ("delete_folders",)

    def get_queryset(self, request):
        live = Q(chats__deleted_at__isnull=True, chats__isnull=False)
        return super().get_queryset(request).annotate(live_chats=Count("chats", filter=live))

    def has_add_permission(self, request):
        return False  # users make folders; staff repair them

    def has_delete_permission(self, request, obj=None):
        return False  # the action, which tells the owner's tabs

    def save_model(self, request, obj, form, change):
        services.update_folder(folder=Folder.objects.get(pk=obj.pk), name=form.cleaned_data["name"],
                               instructions=form.cleaned_data["instructions"])

    @admin.display(description="chats", ordering="live_chats")
    def chat_count(self, folder):
        return folder.live_chats

    @admin.display(description="instructions")
    def instructions_excerpt(self, folder):
        return excerpt(folder.instructions, 60) or "—"

    @admin.display(description="created", ordering="created_at")
    def created(self, folder):
        return stamp(folder.created_at)

    @admin.display(description="its chats")
    def chats(self, folder):
        return chats_link(folder, "folder__id__exact", folder.live_chats)

    @admin.action(description="Delete folder (its chats stay, in no folder)", permissions=["change"])
    def delete_folders(self, request, queryset):
        def delete(folder):
            services.delete_folder(folder=folder)
            return "deleted; its chats are in no folder"

        run_each(self, request, queryset, delete, verb="Delete folder", log_deletion=True)

    delete_folders.confirm = "Delete this folder? Its chats stay, in no folder."


@admin.register(Tag)
class TagAdmin(ObjectActionsMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "chat_count"]
    list_select_related = ["owner"]
    search_fields = ["name", "owner__username"]
    fields = ["owner", "name", "chats"]
    readonly_fields = fields
    actions = ["delete_tags"]
    object_actions = ("delete_tags",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            live_chats=Count("chats", filter=Q(chats__deleted_at__isnull=True, chats__isnull=False)))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="chats", ordering="live_chats")
    def chat_count(self, tag):
        return tag.live_chats

    @admin.display(description="its chats")
    def chats(self, tag):
        return chats_link(tag, "tags__id__exact", tag.live_chats)

    @admin.action(description="Delete tag (taken off its chats)", permissions=["change"])
    def delete_tags(self, request, queryset):
        def delete(tag):
            return f"taken off {services.delete_tag(tag=tag)} chat(s) and deleted"

        run_each(self, request, queryset, delete, verb="Delete tag", log_deletion=True)

    delete_tags.confirm = "Delete this tag? It is taken off every chat that has it."
