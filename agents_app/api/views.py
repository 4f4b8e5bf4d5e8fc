"""API views for agents and runs: thin — read through selectors, write through services."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from agents_app import selectors, services
from agents_app.api import events as run_events
from agents_app.api import serializers as s
from agents_app.api.payloads import agent_payload, run_payload
from hub.api.schema import error_response
from hub.api.sse import EventOut, sse_response
from hub.api.throttling import SendRateThrottle
from hub.api.views import ApiView, valid
from hub.errors import InvalidInput, NotFound

RUN_ID = OpenApiParameter("run_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.INT, OpenApiParameter.PATH)


class AgentListView(ApiView):
    @extend_schema(operation_id="agents_list", tags=["agents"], responses=s.AgentListOut,
                   summary="Your agents and the shared ones")
    def get(self, request):
        agents = selectors.agents_usable_by(user=request.user)
        return Response({"results": [agent_payload(a, user=request.user) for a in agents]})

    @extend_schema(operation_id="agents_create", tags=["agents"], request=s.AgentIn, responses={201: s.AgentOut},
                   summary="Make an agent (and its main chat)")
    def post(self, request):
        data = valid(s.AgentIn, request.data)
        agent = services.create_agent(owner=request.user, **data)
        return Response(agent_payload(agent, user=request.user), status=201)


class AgentDetailView(ApiView):
    def _own(self, request, agent_id):
        agent = selectors.agent_for_user(user=request.user, agent_id=agent_id)
        if agent.owner_id != request.user.pk:
            raise PermissionDenied("A shared agent is changed by staff, in the admin.")
        return agent

    @extend_schema(operation_id="agents_retrieve", tags=["agents"], parameters=[AGENT_ID], responses=s.AgentOut)
    def get(self, request, agent_id):
        agent = selectors.agent_for_user(user=request.user, agent_id=agent_id)
        return Response(agent_payload(agent, user=request.user))

    @extend_schema(operation_id="agents_update", tags=["agents"], parameters=[AGENT_ID], request=s.AgentPatch,
                   responses=s.AgentOut, summary="Change your agent (only the fields given)")
    def patch(self, request, agent_id):
        agent = self._own(request, agent_id)
        data = valid(s.AgentPatch, request.data)
        agent = services.update_agent(agent=agent, **data)
        return Response(agent_payload(agent, user=request.user))

    @extend_schema(operation_id="agents_destroy", tags=["agents"], parameters=[AGENT_ID], responses={204: None},
                   summary="Delete your agent; its past messages stay")
    def delete(self, request, agent_id):
        services.delete_agent(agent=self._own(request, agent_id))
        return Response(status=204)


class RunDetailView(ApiView):
    @extend_schema(operation_id="runs_retrieve", tags=["runs"], parameters=[RUN_ID], responses=s.RunOut)
    def get(self, request, run_id):
        return Response(run_payload(selectors.run_for_user(user=request.user, run_id=run_id)))


class RunCancelView(ApiView):
    @extend_schema(operation_id="runs_cancel", tags=["runs"], parameters=[RUN_ID], request=None,
                   responses=s.CancelOut, summary="Stop a live run; its partial reply is kept as cancelled")
    def post(self, request, run_id):
        run = selectors.run_for_user(user=request.user, run_id=run_id)
        cancelled = services.cancel_run(run=run)
        run.refresh_from_db()
        return Response({"cancelled": cancelled, "run": run_payload(run)})


def _live_chat(run):
    """The run's chat (run_for_user loaded it); a deleted chat answers 404 for a new turn, as it does itself."""
    if run.chat.deleted_at is not None:
        raise NotFound("no such chat")
    return run.chat


class RunContinueView(ApiView):
    throttle_classes = [SendRateThrottle]

    @extend_schema(operation_id="runs_continue", tags=["runs"], parameters=[RUN_ID], request=None,
                   responses={202: s.RunOut},
                   summary="Continue the agent's last reply in the run's thread (a new run)")
    def post(self, request, run_id):
        run = selectors.run_for_user(user=request.user, run_id=run_id)
        chat = _live_chat(run)
        new_run = services.continue_last_turn(chat=chat, agent=run.agent, thread=run.thread)
        return Response(run_payload(new_run), status=202)


class RunRegenerateView(ApiView):
    throttle_classes = [SendRateThrottle]

    @extend_schema(operation_id="runs_regenerate", tags=["runs"], parameters=[RUN_ID], request=None,
                   responses={202: s.RunOut},
                   summary="Answer the same question again, into the same reply (old text kept in its data)")
    def post(self, request, run_id):
        run = selectors.run_for_user(user=request.user, run_id=run_id)
        _live_chat(run)
        if run.reply_message is None:
            raise InvalidInput.for_field("run", "this run has no reply to regenerate")
        return Response(run_payload(services.regenerate(message=run.reply_message)), status=202)


class RunEventsView(ApiView):
    @extend_schema(
        operation_id="runs_events", tags=["runs"],
        parameters=[RUN_ID, OpenApiParameter("Last-Event-ID", OpenApiTypes.STR, OpenApiParameter.HEADER,
                                             description="Resume after this event (no gap, no repeat).")],
        responses={(200, "text/event-stream"): EventOut, 404: error_response("404")},
        summary="Server-Sent Events of the run's turn (run.updated, message.delta, message.settled, end)",
        description=run_events.__doc__,
    )
    def get(self, request, run_id):
        run = selectors.run_for_user(user=request.user, run_id=run_id)
        position = run_events.Position.parse(
            request.headers.get("Last-Event-ID") or request.query_params.get("last_event_id"), run.pk)
        return sse_response(run_events.stream_runs([run_events.RunFollower(run.pk, position)]))
