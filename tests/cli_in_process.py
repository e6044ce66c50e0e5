"""The ``dynadesk`` command run in the test's own process, exactly as ``python -m app`` runs it:
``app.cli.main`` turns every failure into a message on stderr and an exit status, never a traceback.

A fresh interpreter per command pays its imports (torch, transformers, onnx: seconds each, more on
a loaded machine) every time; in-process they are paid once per worker. Standard input, output,
error and the environment are the command's own (click's test isolation), and the logging main()
sets up for the data folder is undone afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from click.testing import CliRunner


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run_dynadesk(*args, env: Mapping[str, str] | None = None, input: str | None = None) -> Ran:
    """``dynadesk ARGS``, with ``env`` added to the environment and ``input`` on standard input."""
    from app.cli import main
    from app.core import logs

    root = logging.getLogger()
    handlers, level, handler = list(root.handlers), root.level, logs._handler
    try:
        with CliRunner().isolation(input=input, env=dict(env or {})) as (out, err, _):
            try:
                main([str(arg) for arg in args])
                code: object = 0
            except SystemExit as exited:
                code = exited.code
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    finally:
        for extra in set(root.handlers) - set(handlers):
            root.removeHandler(extra)
            extra.close()
        root.setLevel(level)
        logs._handler = handler
    return Ran(code if isinstance(code, int) else (0 if code is None else 1), stdout, stderr)
