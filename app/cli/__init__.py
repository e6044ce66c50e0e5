"""The ``dynadesk`` command: the GUI by default, subcommands for work at the command line.

Every failure ends with a readable message and a non-zero exit status; tracebacks go to the
log file, never to the terminal.
"""

from __future__ import annotations

import logging
import sys

import click

from app.cli.compare import compare
from app.cli.desk import cli
from app.cli.evaluate import eval_
from app.cli.exposure import exposure
from app.cli.leaderboard import leaderboard
from app.cli.models import models, train
from app.cli.proposals import COMMANDS as PROPOSAL_COMMANDS
from app.cli.quality import quality
from app.cli.rounds import rounds
from app.cli.serve import serve
from app.cli.smoke import smoke_test
from app.cli.suggest import suggest
from app.cli.suggest_words import suggest_words
from app.cli.suite import suite
from app.cli.sync import sync
from app.cli.wellbeing import wellbeing
from app.core.errors import DynadeskError
from app.core.logs import log_file

log = logging.getLogger("dynadesk")

for command in (models, train, rounds, serve, sync, smoke_test, eval_, quality, suggest, suggest_words,
                wellbeing, suite):
    cli.add_command(command)
rounds.add_command(compare)  # dynadesk rounds compare
rounds.add_command(leaderboard)  # dynadesk rounds leaderboard
for command in PROPOSAL_COMMANDS:  # dynadesk rounds propose, proposals, promote, decline, policy
    rounds.add_command(command)
cli.add_command(exposure)  # dynadesk exposure export: team aggregates only


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="dynadesk", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        code = 1
    except DynadeskError as exc:
        log.info("command failed: %s", exc)
        click.echo(f"Error: {exc}", err=True)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # the last line of defence: a message, never a traceback
        log.exception("unexpected error")
        where = log_file()
        click.echo(f"Unexpected error: {exc.__class__.__name__}: {exc}\n"
                   f"Nothing was left half-written. Details are in {where}.", err=True)
        code = 2
    sys.exit(code if isinstance(code, int) else 0)
