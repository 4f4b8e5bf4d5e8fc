from django import forms

from agents_app.models import Agent, ProviderKey
from agents_app.tools import USER_TOOLS


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100)
    avatar = forms.CharField(max_length=500, required=False, help_text="An emoji or an image URL.")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    model = forms.CharField(
        max_length=200,
        help_text="Pick one the provider offers, or type one: openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
                  "ollama:llama3.2 or builtin:librarian",
        widget=forms.TextInput(attrs={"list": "model-choices", "autocomplete": "off", "spellcheck": "false"}),
    )
    base_url = forms.CharField(max_length=200, required=False,
                               help_text="For any OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    system_prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    temperature = forms.FloatField(min_value=0, max_value=2, required=False)
    max_tokens = forms.IntegerField(min_value=1, max_value=200_000, required=False)
    vision = forms.TypedChoiceField(
        label="Sees images", required=False, empty_value=None,
        coerce=lambda value: value == "yes",
        choices=[("", "Guess from the model's name"), ("yes", "Yes: send it the images of its chats"),
                 ("no", "No: tell it an image's name only")],
    )
    tools = forms.MultipleChoiceField(choices=[(t, t) for t in USER_TOOLS], required=False,
                                      widget=forms.CheckboxSelectMultiple)
    reply_policy = forms.ChoiceField(choices=Agent.ReplyPolicy.choices)
    recovery_policy = forms.ChoiceField(choices=Agent.RecoveryPolicy.choices)

    @classmethod
    def for_agent(cls, agent: Agent, data=None):
        initial = {
            "name": agent.name, "avatar": agent.avatar, "description": agent.description, "model": agent.model,
            "base_url": agent.base_url, "system_prompt": agent.system_prompt, "tools": agent.tools,
            "temperature": (agent.settings or {}).get("temperature"),
            "max_tokens": (agent.settings or {}).get("max_tokens"),
            "vision": {True: "yes", False: "no"}.get((agent.settings or {}).get("vision"), ""),
            "reply_policy": agent.reply_policy, "recovery_policy": agent.recovery_policy,
        }
        return cls(data, initial=initial)

    def service_fields(self, *, current_settings: dict | None = None) -> dict:
        data = dict(self.cleaned_data)
        settings = dict(current_settings or {})
        for key in ("temperature", "max_tokens", "vision"):
            value = data.pop(key)
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        data["settings"] = settings
        return data


class ProviderKeyForm(forms.Form):
    provider = forms.ChoiceField(choices=ProviderKey.Provider.choices)
    key = forms.CharField(widget=forms.PasswordInput(render_value=False),
                          help_text="Stored encrypted; never shown again.")


class RemoteForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.CharField(max_length=500, help_text="The MCP server's streamable HTTP address, e.g. http://127.0.0.1:8000/mcp")
    header_name = forms.CharField(max_length=100, required=False, help_text="Optional, e.g. Authorization")
    header_value = forms.CharField(max_length=2000, required=False, widget=forms.PasswordInput(render_value=False),
                                   help_text="Stored secret; never shown again.")

    def headers(self) -> dict:
        name, value = self.cleaned_data["header_name"].strip(), self.cleaned_data["header_value"]
        return {name: value} if name and value else {}
