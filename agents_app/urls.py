from django.urls import path

from agents_app import views

app_name = "agents"
urlpatterns = [
    path("", views.agent_list, name="list"),
    path("new/", views.agent_create, name="create"),
    path("<int:agent_id>/", views.agent_edit, name="edit"),
    path("<int:agent_id>/delete/", views.agent_delete, name="delete"),
    path("keys/", views.provider_keys, name="keys"),
    path("keys/<str:provider>/delete/", views.provider_key_delete, name="key_delete"),
]
