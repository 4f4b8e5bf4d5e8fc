from django.urls import path

from agents_app import views

app_name = "agents"
urlpatterns = [
    path("", views.agent_list, name="list"),
]
