from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    pass


class ChatForm(forms.Form):
    title = forms.CharField(max_length=settings.HUB_MAX_TITLE_CHARS, required=False)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    picture = forms.CharField(max_length=500, required=False, help_text="An emoji or an image URL.")
    agents = forms.ModelMultipleChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple,
                                            help_text="The agents that take part in the chat.")

    def __init__(self, *args, agents_queryset, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agents"].queryset = agents_queryset


class MemoryBlockForm(forms.Form):
    label = forms.CharField(max_length=100, initial="memory")
    description = forms.CharField(max_length=500, required=False)
    max_tokens = forms.IntegerField(min_value=1, max_value=100_000, initial=2000)
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False,
                              help_text="Replaces the whole block. Leave empty to clear it.")
