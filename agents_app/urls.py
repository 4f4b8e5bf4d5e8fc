from django.urls import path

from agents_app import views

app_name = "agents"
urlpatterns = [
    path("", views.agent_list, name="list"),
    path("new/", views.agent_create, name="create"),
    path("<int:agent_id>/", views.agent_edit, name="edit"),
    path("<int:agent_id>/delete/", views.agent_delete, name="delete"),
    path("<int:agent_id>/model/", views.agent_model, name="model"),
    path("models/", views.model_choices, name="model_choices"),
    path("keys/", views.provider_keys, name="keys"),
    path("remotes/", views.remote_list, name="remotes"),
    path("remotes/choices/", views.remote_choices, name="remote_choices"),
    path("remotes/<int:remote_id>/delete/", views.remote_delete, name="remote_delete"),
    path("remotes/<int:remote_id>/attach/", views.remote_attach, name="remote_attach"),
    path("keys/<str:provider>/delete/", views.provider_key_delete, name="key_delete"),
]
