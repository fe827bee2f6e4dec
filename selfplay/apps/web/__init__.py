"""The web board: play any engine in the browser and see what it thinks.

``python -m selfplay.apps.web`` serves a single page (SVG board, no CDN, no build step) and
a JSON API from the installed package; engines run in worker processes. Modules:
:mod:`~selfplay.apps.web.games` (validation, states, notations, the game store),
:mod:`~selfplay.apps.web.engines` (worker processes and analysis), :mod:`~selfplay.apps.web.app`
(the Starlette app). Needs the ``web`` extra: ``pip install -e '.[web]'``.
"""
