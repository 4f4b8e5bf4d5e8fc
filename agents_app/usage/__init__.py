"""Tokens: what each user's replies cost as their providers reported them (summed from the run
rows' token columns), and the optional monthly limit (HUB_MONTHLY_TOKENS) that stops new turns."""
