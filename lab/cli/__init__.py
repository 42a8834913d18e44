"""The ``numalab`` command: one module per command group (``cmd_*``), each adding its parser; ``main`` puts them
together. A thin front end over the library below it.

A command's handler imports the library code only it runs (the run, the matrix, a report, a build) inside
the function, marked ``# (on use: start-up time)``: numalab's start (every command, ``--help``) then loads
the parsers and the little they need, not the whole library. Elsewhere imports sit at the top of the module
(tests/unit/test_layers.py: every import inside a function says why)."""

from lab.cli.main import main

__all__ = ["main"]
