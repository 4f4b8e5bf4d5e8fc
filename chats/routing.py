from django.urls import path

from chats.consumers import ChatConsumer, DirectoryConsumer

websocket_urlpatterns = [
    path("ws/chats/<str:chat_id>/", ChatConsumer.as_asgi()),
    path("ws/directory/", DirectoryConsumer.as_asgi()),
]
