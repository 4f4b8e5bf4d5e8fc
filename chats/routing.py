from django.urls import path

from chats.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chats/<str:chat_id>/", ChatConsumer.as_asgi()),
]
