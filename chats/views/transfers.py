"""The Import and export page: upload an export to import, choose what to export, and follow the
jobs. The page's script talks to the API (/api/v1/transfers/, with the page's session and CSRF
token) and hears transfer.updated on the user's socket."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chats import events
from chats.models import Chat, Folder
from chats.transfers import selectors as transfer_selectors


@login_required
@require_GET
def transfers_page(request):
    jobs = transfer_selectors.recent_transfers(user=request.user)
    folders = Folder.objects.filter(owner=request.user).order_by("name", "id")
    chats = Chat.objects.filter(owner=request.user, deleted_at__isnull=True).order_by("-updated_at", "-id")
    return render(request, "chats/transfers.html", {
        "jobs": [events.transfer_payload(job) for job in jobs],
        "folders": folders,
        "chats": chats[:200],
        "max_import_mb": settings.HUB_MAX_IMPORT_MB,
    })
