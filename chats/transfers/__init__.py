"""Bringing chats in and taking them out: imports of Hub, ChatGPT and Claude exports and exports
as Hub JSON or Markdown, run as background jobs (chats.models.Transfer) with progress.

jobs: start and run a job; importing, exporting: what a job does; sources: reading an upload as
a stream; chatgpt, claude: one entry of each product's export; selectors: reads by owner.
"""
