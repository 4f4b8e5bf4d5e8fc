from django.urls import path

from chats.api.views import chats, files, library, messages

urlpatterns = [
    path("chats/", chats.ChatListView.as_view(), name="api-chats"),
    path("chats/import/", chats.ChatImportView.as_view(), name="api-chat-import"),
    path("chats/<str:chat_id>/", chats.ChatDetailView.as_view(), name="api-chat"),
    path("chats/<str:chat_id>/restore/", chats.ChatRestoreView.as_view(), name="api-chat-restore"),
    path("chats/<str:chat_id>/save/", chats.ChatSaveView.as_view(), name="api-chat-save"),
    path("chats/<str:chat_id>/fork/", chats.ChatForkView.as_view(), name="api-chat-fork"),
    path("chats/<str:chat_id>/export/", chats.ChatExportView.as_view(), name="api-chat-export"),
    path("chats/<str:chat_id>/threads/", chats.ThreadListView.as_view(), name="api-threads"),
    path("chats/<str:chat_id>/threads/<str:thread_id>/", chats.ThreadDetailView.as_view(), name="api-thread"),
    path("chats/<str:chat_id>/members/", chats.MemberListView.as_view(), name="api-members"),
    path("chats/<str:chat_id>/members/<str:agent_id>/", chats.MemberDetailView.as_view(), name="api-member"),
    path("chats/<str:chat_id>/messages/<str:message_id>/", messages.MessageDetailView.as_view(), name="api-message"),
    path("chats/<str:chat_id>/messages/<str:message_id>/feedback/", messages.MessageFeedbackView.as_view(),
         name="api-message-feedback"),
    path("chats/<str:chat_id>/messages/<str:message_id>/resubmit/", messages.MessageResubmitView.as_view(),
         name="api-message-resubmit"),
    path("chats/<str:chat_id>/files/", files.ChatFileListView.as_view(), name="api-chat-files"),
    path("files/<str:file_id>/", files.FileDetailView.as_view(), name="api-file"),
    path("files/<str:file_id>/content/", files.FileContentView.as_view(), name="api-file-content"),
    path("memory/", library.MemoryListView.as_view(), name="api-memory"),
    path("memory/entries/<str:entry_id>/", library.MemoryEntryView.as_view(), name="api-memory-entry"),
    path("memory/<str:label>/", library.MemoryBlockView.as_view(), name="api-memory-block"),
    path("memory/<str:label>/append/", library.MemoryAppendView.as_view(), name="api-memory-append"),
    path("documents/", library.DocumentListView.as_view(), name="api-documents"),
    path("documents/<str:document_id>/", library.DocumentDetailView.as_view(), name="api-document"),
    path("search/messages/", library.SearchMessagesView.as_view(), name="api-search-messages"),
    path("search/chats/", library.SearchChatsView.as_view(), name="api-search-chats"),
    path("search/documents/", library.SearchDocumentsView.as_view(), name="api-search-documents"),
]
