"""Folders and tags: list, make, rename, set a folder's instructions, delete. A chat's pin,
archive, folder and tags change through its PATCH (chats.api.views.chats)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from chats import events, selectors, services
from chats.api import serializers as s
from hub.api.views import ApiView, valid

FOLDER_ID = OpenApiParameter("folder_id", OpenApiTypes.INT, OpenApiParameter.PATH)


def own_folder(request, folder_id):
    return selectors.folder_for_user(user=request.user, folder_id=folder_id)


class FolderListView(ApiView):
    @extend_schema(operation_id="folders_list", tags=["folders"], responses=s.FolderListOut,
                   summary="Your folders, by name")
    def get(self, request):
        return Response({"results": [events.folder_payload(f) for f in selectors.folders_for_user(user=request.user)]})

    @extend_schema(operation_id="folders_create", tags=["folders"], request=s.FolderIn, responses={201: s.FolderOut},
                   summary="Make a folder (its instructions are read by every agent in its chats)")
    def post(self, request):
        data = valid(s.FolderIn, request.data)
        folder = services.create_folder(owner=request.user, name=data["name"],
                                        instructions=data.get("instructions", ""))
        return Response(events.folder_payload(folder), status=201)


class FolderDetailView(ApiView):
    @extend_schema(operation_id="folders_retrieve", tags=["folders"], parameters=[FOLDER_ID], responses=s.FolderOut)
    def get(self, request, folder_id):
        return Response(events.folder_payload(own_folder(request, folder_id)))

    @extend_schema(operation_id="folders_update", tags=["folders"], parameters=[FOLDER_ID], request=s.FolderPatch,
                   responses=s.FolderOut, summary="Rename a folder or set its instructions")
    def patch(self, request, folder_id):
        folder = own_folder(request, folder_id)
        data = valid(s.FolderPatch, request.data)
        folder = services.update_folder(folder=folder, name=data.get("name"), instructions=data.get("instructions"))
        return Response(events.folder_payload(folder))

    @extend_schema(operation_id="folders_destroy", tags=["folders"], parameters=[FOLDER_ID], responses={204: None},
                   summary="Delete a folder; its chats stay, in no folder")
    def delete(self, request, folder_id):
        services.delete_folder(folder=own_folder(request, folder_id))
        return Response(status=204)


class TagListView(ApiView):
    @extend_schema(operation_id="tags_list", tags=["tags"], responses=s.TagListOut,
                   summary="Your tags, by name, with their number of chats")
    def get(self, request):
        return Response({"results": selectors.tags_for_user(user=request.user)})
