from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    pass


class AgentChoiceField(forms.ModelMultipleChoiceField):
    """Agents by id; an id past the 64-bit range names no agent (SQLite cannot compare it at all)."""

    def _check_values(self, value):
        for pk in value:
            text = str(pk).strip()
            digits = text.lstrip("-")
            if digits.isascii() and digits.isdecimal() and (len(digits) > 19 or int(digits) > 2**63 - 1):
                raise forms.ValidationError(self.error_messages["invalid_pk_value"], code="invalid_pk_value",
                                            params={"pk": text[:30]})
        return super()._check_values(value)


class ChatForm(forms.Form):
    title = forms.CharField(max_length=settings.HUB_MAX_TITLE_CHARS, required=False)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    picture = forms.CharField(max_length=500, required=False, help_text="An emoji or an image URL.")
    agents = AgentChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple,
                              help_text="The agents that take part in the chat.")
    temporary = forms.BooleanField(required=False, label="Temporary chat",
                                   help_text="Kept out of the database and gone after a day without use, "
                                             "unless you save it.")

    def __init__(self, *args, agents_queryset, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agents"].queryset = agents_queryset


class MemoryBlockForm(forms.Form):
    label = forms.CharField(max_length=100, initial="memory")
    description = forms.CharField(max_length=500, required=False)
    max_tokens = forms.IntegerField(min_value=1, max_value=100_000, initial=2000)
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False,
                              help_text="Replaces the whole block. Leave empty to clear it.")
