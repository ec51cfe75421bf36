"""The ``lakesink`` command (:mod:`.main`); ``python -m lakesink.cli`` runs it too."""
from lakesink.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
