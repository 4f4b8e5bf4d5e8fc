"""`manage.py runserver` as Daphne's: the ASGI app, pages and websockets, with autoreload.

Daphne's own app does the same, but its module imports Twisted and installs its reactor in every
process that sets up Django (about 0.3 s of each worker's, beat's and command's start). This app
loads Daphne's command only when runserver runs. It comes first in INSTALLED_APPS, so its
runserver is the one Django finds (before staticfiles').
"""
