"""Messages: read and edit one (listing and sending are agents_app.api.messages: a send answers with runs)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from chats import events, selectors, services
from chats.api import serializers as s
from chats.api.views.chats import CHAT_ID, own_chat
from hub.api.views import ApiView, valid

MESSAGE_ID = OpenApiParameter("message_id", OpenApiTypes.INT, OpenApiParameter.PATH)


class MessageDetailView(ApiView):
    @extend_schema(operation_id="messages_retrieve", tags=["messages"], parameters=[CHAT_ID, MESSAGE_ID],
                   responses=s.MessageOut)
    def get(self, request, chat_id, message_id):
        message = selectors.message_for_chat(chat=own_chat(request, chat_id), message_id=message_id)
        return Response(events.message_payload(message))

    @extend_schema(operation_id="messages_update", tags=["messages"], parameters=[CHAT_ID, MESSAGE_ID],
                   request=s.MessageEdit, responses=s.MessageOut,
                   summary="Edit a message or note (not a reply that is still streaming)")
    def patch(self, request, chat_id, message_id):
        message = selectors.message_for_chat(chat=own_chat(request, chat_id), message_id=message_id)
        message = services.edit_message(message=message, content=valid(s.MessageEdit, request.data)["content"])
        return Response(events.message_payload(message))


class MessageFeedbackView(ApiView):
    @extend_schema(operation_id="messages_feedback", tags=["messages"], parameters=[CHAT_ID, MESSAGE_ID],
                   request=s.FeedbackIn, responses=s.MessageOut,
                   summary="Rate an agent's reply: a thumb up or down, or null to take it back")
    def post(self, request, chat_id, message_id):
        message = selectors.message_for_chat(chat=own_chat(request, chat_id), message_id=message_id)
        rating = valid(s.FeedbackIn, request.data)["rating"]
        return Response(events.message_payload(services.rate_reply(message=message, rating=rating)))


class MessageResubmitView(ApiView):
    @extend_schema(operation_id="messages_resubmit", tags=["messages"], parameters=[CHAT_ID, MESSAGE_ID],
                   request=s.MessageEdit, responses=s.MessageOut,
                   summary="Edit your message and have the agents answer it again (earlier answers kept as versions)")
    def post(self, request, chat_id, message_id):
        message = selectors.message_for_chat(chat=own_chat(request, chat_id), message_id=message_id)
        content = valid(s.MessageEdit, request.data)["content"]
        return Response(events.message_payload(services.resubmit_message(message=message, content=content)))
