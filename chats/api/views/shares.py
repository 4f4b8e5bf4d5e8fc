"""Share links: make one of a chat (a read-only snapshot anyone with its link can open), list a
chat's or all of your live links, revoke one. Another user's chat or link is 404."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from chats import events, selectors, services
from chats.api import serializers as s
from chats.api.views.chats import CHAT_ID, own_chat
from chats.temporary import chats as temporary_chats
from hub.api.views import ApiView, valid

SHARE_ID = OpenApiParameter("share_id", OpenApiTypes.INT, OpenApiParameter.PATH)


def _page(links, more) -> dict:
    return {"results": [events.share_payload(link) for link in links],
            "next_cursor": str(links[-1].pk) if more and links else None}


class ChatShareListView(ApiView):
    @extend_schema(operation_id="shares_chat_list", tags=["shares"], parameters=[CHAT_ID, s.ShareListQuery],
                   responses=s.SharePageOut, summary="This chat's live share links, newest first")
    def get(self, request, chat_id):
        chat = own_chat(request, chat_id)
        query = valid(s.ShareListQuery, request.query_params)
        if temporary_chats.is_temporary_chat(chat):
            return Response({"results": [], "next_cursor": None})
        return Response(_page(*selectors.shares_of_user(user=request.user, chat=chat, limit=query["limit"],
                                                        before=query.get("before"))))

    @extend_schema(operation_id="shares_create", tags=["shares"], parameters=[CHAT_ID], request=s.ShareIn,
                   responses={201: s.ShareOut},
                   summary="Share a read-only snapshot of the chat as it is now (notes and memory only if asked)")
    def post(self, request, chat_id):
        chat = own_chat(request, chat_id)
        link = services.share_chat(chat=chat, **valid(s.ShareIn, request.data))
        return Response(events.share_payload(link), status=201)


class ShareListView(ApiView):
    @extend_schema(operation_id="shares_list", tags=["shares"], parameters=[s.ShareListQuery],
                   responses=s.SharePageOut, summary="All your live share links, newest first")
    def get(self, request):
        query = valid(s.ShareListQuery, request.query_params)
        return Response(_page(*selectors.shares_of_user(user=request.user, limit=query["limit"],
                                                        before=query.get("before"))))


class ShareDetailView(ApiView):
    @extend_schema(operation_id="shares_revoke", tags=["shares"], parameters=[SHARE_ID], request=None,
                   responses={204: None}, summary="Revoke a share link: its page answers 404 from now on")
    def delete(self, request, share_id):
        services.revoke_share(link=selectors.share_for_user(user=request.user, share_id=share_id))
        return Response(status=204)
