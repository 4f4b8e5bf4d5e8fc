"""GET /api/v1/usage/: the user's own tokens by agent and by day, with the monthly limit."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers as drf
from rest_framework.response import Response

from agents_app.usage import report
from hub.api.views import ApiView


class UsageCountsOut(drf.Serializer):
    input_tokens = drf.IntegerField()
    output_tokens = drf.IntegerField()
    total_tokens = drf.IntegerField()
    runs = drf.IntegerField(help_text="Turns that ended in the period (a continuation after a recovery is one more)")


class AgentUsageOut(UsageCountsOut):
    agent_id = drf.IntegerField()
    agent_name = drf.CharField()
    agent_model = drf.CharField(help_text="The model the agent is set to (each reply names the one that answered)")


class DayUsageOut(UsageCountsOut):
    date = drf.DateField(help_text="A day (UTC); every day of the period is listed, zeros too")


class UsagePeriodOut(drf.Serializer):
    days = drf.IntegerField(allow_null=True)
    month = drf.CharField(allow_null=True)
    start = drf.DateField()
    end = drf.DateField(help_text="The last day of the period, included")


class TokenLimitOut(drf.Serializer):
    monthly_tokens = drf.IntegerField(allow_null=True, help_text="HUB_MONTHLY_TOKENS; None: no limit")
    used = drf.IntegerField(allow_null=True, help_text="Tokens used this calendar month (UTC)")
    left = drf.IntegerField(allow_null=True)
    reached = drf.BooleanField(help_text="True: new turns are not started until resets_on")
    resets_on = drf.DateField()


class UsageReportOut(drf.Serializer):
    period = UsagePeriodOut()
    totals = UsageCountsOut()
    by_agent = AgentUsageOut(many=True)
    by_day = DayUsageOut(many=True)
    limit = TokenLimitOut()


class UsageView(ApiView):
    @extend_schema(
        operation_id="usage_retrieve", tags=["usage"], responses=UsageReportOut,
        parameters=[
            OpenApiParameter("days", OpenApiTypes.INT, description="The last N days, today included (1-366; 30)"),
            OpenApiParameter("month", OpenApiTypes.STR, description="A calendar month, YYYY-MM (instead of days)"),
        ],
        summary="Your tokens by agent and by day, and the monthly limit",
    )
    def get(self, request):
        period = report.period_from(days=request.query_params.get("days"), month=request.query_params.get("month"))
        return Response(report.usage_for_user(user=request.user, period=period))
