from django.urls import path

from chats import views

app_name = "chats"
urlpatterns = [
    path("", views.chat_list, name="list"),
    path("directory/", views.directory, name="directory"),
    path("search/", views.message_search, name="message_search"),
    path("memory/", views.memory_page, name="memory"),
    path("memory/entries/<int:entry_id>/delete/", views.memory_entry_delete, name="memory_entry_delete"),
    path("chats/new/", views.chat_create, name="create"),
    path("chats/<str:chat_id>/", views.chat_detail, name="detail"),
    path("chats/<str:chat_id>/state/", views.chat_state, name="state"),
    path("chats/<str:chat_id>/threads/", views.chat_threads, name="threads"),
    path("chats/<str:chat_id>/messages/", views.chat_messages, name="messages"),
    path("chats/<str:chat_id>/messages/<int:message_id>/feedback/", views.message_feedback, name="message_feedback"),
    path("chats/<str:chat_id>/messages/<int:message_id>/resubmit/", views.message_resubmit, name="message_resubmit"),
    path("chats/<str:chat_id>/messages/<int:message_id>/regenerate/", views.message_regenerate,
         name="regenerate"),
    path("chats/<str:chat_id>/settings/", views.chat_update, name="update"),
    path("chats/<str:chat_id>/delete/", views.chat_delete, name="delete"),
    path("chats/<str:chat_id>/save/", views.chat_save, name="save"),
    path("chats/<str:chat_id>/restore/", views.chat_restore, name="restore"),
    path("chats/<str:chat_id>/remotes/", views.remote_attach, name="remote_attach"),
    path("chats/<str:chat_id>/members/", views.member_add, name="member_add"),
    path("chats/<str:chat_id>/files/", views.file_upload, name="file_upload"),
    path("files/<str:file_id>/", views.file_download, name="file_download"),
    path("files/<str:file_id>/remove/", views.file_remove, name="file_remove"),
    path("chats/<str:chat_id>/members/<int:agent_id>/remove/", views.member_remove, name="member_remove"),
]
