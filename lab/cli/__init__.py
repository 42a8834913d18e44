"""The ``numalab`` command: one module per command group (``cmd_*``), each adding its parser; ``main`` puts them
together. A thin front end over the library below it."""

from lab.cli.main import main

__all__ = ["main"]
