"""The ``lakesink`` command (:mod:`.main`); ``python -m lakesink.cli`` runs it too.

One module per subcommand (``check``, ``sink``, ``vacuum``, ``demo``, ``dev``); they return data and
:mod:`.output` renders it as text or JSON (global ``--format``).
"""
from lakesink.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
