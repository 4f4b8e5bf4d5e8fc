from django.urls import path

from chats import views

app_name = "chats"
urlpatterns = [
    path("", views.chat_list, name="list"),
    path("memory/", views.memory_page, name="memory"),
    path("memory/entries/<int:entry_id>/delete/", views.memory_entry_delete, name="memory_entry_delete"),
    path("chats/new/", views.chat_create, name="create"),
    path("chats/<str:chat_id>/", views.chat_detail, name="detail"),
    path("chats/<str:chat_id>/messages/", views.chat_messages, name="messages"),
]
