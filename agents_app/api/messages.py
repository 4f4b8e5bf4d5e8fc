"""A chat's messages as the API lists and sends them, and a chat's runs.

They live here, not in chats.api, because a send answers with the runs it started (or streams
them): chats never imports agents_app. Reading and editing one message stays in chats.api.
"""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as drf
from rest_framework.response import Response

from agents_app.api import events as run_events
from agents_app.api.payloads import run_payload
from agents_app.api.serializers import RunListOut, RunOut
from agents_app.selectors import replies_refused_to, runs_of_chat, runs_triggered_by
from chats import events, selectors, services
from chats.api import serializers as s
from chats.api.views.chats import CHAT_ID, own_chat
from hub.api.sse import EventOut, sse_response
from hub.api.throttling import SendRateThrottle
from hub.api.views import ApiView, valid
from hub.errors import InvalidInput, NotFound


class SentOut(drf.Serializer):
    message = s.MessageOut()
    runs = RunOut(many=True, help_text="One queued run per agent that answers; follow each with runs_events.")
    refused = s.MessageOut(many=True, help_text="Replies not started because your monthly token limit is reached "
                                                "(HUB_MONTHLY_TOKENS): one per agent that would have answered, "
                                                "status error, data.error saying so. Empty otherwise.")


class MessageListView(ApiView):
    throttle_classes = [SendRateThrottle]

    def get_throttles(self):
        # Only sends are throttled; reading pages is not.
        request = getattr(self, "request", None)
        return super().get_throttles() if request is None or request.method == "POST" else []

    @extend_schema(operation_id="messages_list", tags=["messages"], parameters=[CHAT_ID, s.MessagePageQuery],
                   responses=s.MessagePageOut,
                   summary="A page of messages by id: the newest, `before` an id, or `after` one (oldest first)")
    def get(self, request, chat_id):
        chat = own_chat(request, chat_id)
        query = valid(s.MessagePageQuery, request.query_params)
        messages, has_more = selectors.message_page(
            chat=chat, before_id=query.get("before"), after_id=query.get("after"),
            page_size=query.get("limit") or settings.MESSAGE_PAGE_SIZE)
        return Response({"results": [events.message_payload(m) for m in messages], "has_more": has_more})

    @extend_schema(
        operation_id="messages_create", tags=["messages"], parameters=[CHAT_ID, s.SendQuery], request=s.MessageIn,
        responses={201: SentOut, (200, "text/event-stream"): EventOut},
        summary="Send a message; member agents answer in runs (with ?stream=true: follow their replies as SSE)",
        description="With `?stream=true` the answer is an event stream: `message.created`, then each run's "
                    "`run.updated`, `message.delta`, `message.settled` and `run.end` (ids as in runs_events, so "
                    "one run can be resumed there with Last-Event-ID), then `end` with every run.",
    )
    def post(self, request, chat_id):
        chat = own_chat(request, chat_id)
        query = valid(s.SendQuery, request.query_params)
        data = valid(s.MessageIn, request.data)
        thread_id = data.pop("thread_id", None)
        thread = None
        if thread_id is not None:
            try:
                thread = selectors.thread_for_chat(chat=chat, thread_id=thread_id)
            except NotFound:
                raise InvalidInput.for_field("thread_id", f"no thread {thread_id} in this chat") from None
        message = services.send_message(chat=chat, thread=thread, **data)
        runs = runs_triggered_by(message=message)
        refused = [] if runs else replies_refused_to(message=message)
        if not query["stream"]:
            return Response({"message": events.message_payload(message), "runs": [run_payload(r) for r in runs],
                             "refused": [events.message_payload(m) for m in refused]}, status=201)
        created = (events.MESSAGE_CREATED, events.message_created(message, client_id=data.get("client_id")), None)
        refusals = [(events.MESSAGE_CREATED, events.message_created(m), None) for m in refused]
        followers = [run_events.RunFollower(r.pk) for r in runs]
        return sse_response(run_events.stream_runs(followers, first=[created, *refusals], many=True))


class ChatRunsView(ApiView):
    @extend_schema(operation_id="chats_runs", tags=["runs"], parameters=[CHAT_ID], responses=RunListOut,
                   summary="A chat's newest runs (50), newest first")
    def get(self, request, chat_id):
        return Response({"results": [run_payload(r) for r in runs_of_chat(chat=own_chat(request, chat_id))]})
