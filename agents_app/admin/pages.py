"""Staff pages beside the model admin: health, repair; and /healthz for probes.

Thin views: the reads are agents_app.health and agents_app.repair (selectors), the fixes go
through the repair services, and each fix records a LogEntry for the staff member who ran it.
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from agents_app import health, workers
from agents_app.repair import CHECK_KEYS, CHECKS, run_repair
from agents_app.repair.audit import record_fix
from agents_app.usage import limit as usage_limit
from agents_app.usage import report as usage_report
from hub.errors import InvalidInput

# Fixing touches runs, messages, memberships and chats: the staff member must be allowed to
# change all of them.
FIX_PERMISSIONS = ("agents_app.change_run", "chats.change_message", "chats.change_membership", "chats.change_chat")


@never_cache
@require_http_methods(["GET", "HEAD"])
def healthz(request):
    """For load balancers and orchestrators: 200 "ok" or 503 "unavailable", and nothing else,
    within a couple of seconds even when a service hangs (health.ready)."""
    ok = health.ready()
    return HttpResponse("ok\n" if ok else "unavailable\n", status=200 if ok else 503,
                        content_type="text/plain; charset=utf-8")


@never_cache
def health_page(request):
    report = health.health()
    context = {**admin.site.each_context(request), "title": "Health", "report": report,
               "heartbeat_seconds": f"{workers.heartbeat_seconds():g}",
               "queued_warning_seconds": f"{health.queued_warning().total_seconds():g}"}
    return TemplateResponse(request, "admin/support/health.html", context)


@never_cache
@require_http_methods(["GET", "POST"])
def repair_page(request):
    """GET: the checks to choose from; GET ?run=1: a dry run of those ticked; POST: fix those ticked.

    The checks read whole tables (seconds on a large hub), so opening the page runs none of them.
    """
    can_fix = request.user.has_perms(FIX_PERMISSIONS)
    source = request.POST if request.method == "POST" else request.GET
    chosen = [key for key in source.getlist("check") if key in CHECK_KEYS] or CHECK_KEYS
    report = None
    if request.method == "POST":
        if not can_fix:
            raise PermissionDenied
        report = run_repair(fix=True, only=chosen,
                            on_fixed=lambda finding: record_fix(user=request.user, finding=finding))
    elif "run" in request.GET:
        report = run_repair(fix=False, only=chosen)
    context = {
        **admin.site.each_context(request), "title": "Repair", "report": report, "can_fix": can_fix,
        "checks": CHECKS, "chosen": chosen, "table": report.as_table() if report else "",
    }
    return TemplateResponse(request, "admin/support/repair.html", context)


@never_cache
@require_http_methods(["GET", "HEAD"])
def usage_page(request):
    """Every user's tokens in a period (?days=N or ?month=YYYY-MM): by user, by agent, by day."""
    error = None
    try:
        period = usage_report.period_from(days=request.GET.get("days"), month=request.GET.get("month"))
    except InvalidInput as exc:
        error, period = exc.message, usage_report.period_from()
    context = {**admin.site.each_context(request), "title": "Usage", "error": error,
               "report": usage_report.usage_for_staff(period=period), "choices": usage_report.period_choices(),
               "monthly_tokens": usage_limit.monthly_limit() or None}
    return TemplateResponse(request, "admin/support/usage.html", context, status=400 if error else 200)
