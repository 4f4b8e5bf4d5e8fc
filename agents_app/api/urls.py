from django.urls import path

from agents_app.api import messages, remotes, usage, views

urlpatterns = [
    # A chat's message list and send (a send answers with its runs), and a chat's runs.
    path("chats/<str:chat_id>/messages/", messages.MessageListView.as_view(), name="api-messages"),
    path("chats/<str:chat_id>/runs/", messages.ChatRunsView.as_view(), name="api-chat-runs"),
    path("agents/", views.AgentListView.as_view(), name="api-agents"),
    path("agents/<str:agent_id>/", views.AgentDetailView.as_view(), name="api-agent"),
    path("runs/<str:run_id>/", views.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/cancel/", views.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/continue/", views.RunContinueView.as_view(), name="api-run-continue"),
    path("runs/<str:run_id>/regenerate/", views.RunRegenerateView.as_view(), name="api-run-regenerate"),
    # As the issue names it: no trailing slash (an event stream is not a collection).
    path("runs/<str:run_id>/events", views.RunEventsView.as_view(), name="api-run-events"),
    path("remotes/", remotes.RemoteListView.as_view(), name="api-remotes"),
    path("remotes/<str:remote_id>/", remotes.RemoteDetailView.as_view(), name="api-remote"),
    path("remotes/<str:remote_id>/attach/", remotes.RemoteAttachView.as_view(), name="api-remote-attach"),
    path("provider-keys/", remotes.KeyListView.as_view(), name="api-provider-keys"),
    path("provider-keys/<str:provider>/", remotes.KeyDetailView.as_view(), name="api-provider-key"),
    path("usage/", usage.UsageView.as_view(), name="api-usage"),
]
