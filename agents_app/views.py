from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from agents_app.selectors import agents_usable_by


@login_required
def agent_list(request):
    return render(request, "agents_app/agent_list.html", {"agents": agents_usable_by(user=request.user)})
