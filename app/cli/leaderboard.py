"""``dynadesk rounds leaderboard``: every model the task has had on every round's held-out split,
and the fill that ``rounds next``, ``rounds open`` and ``rounds close`` run once the round has changed."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli.base import Context, pass_context


def _progress():
    from local_models.progress import Progress

    return Progress(on_message=lambda text: click.echo(text, err=True))


def fill_after_round_change(desk, task_code: str) -> None:
    """Score the leaderboard's missing cells after a round change (the change itself is already
    committed: a failure here is reported and leaves the rounds as they are)."""
    from app.core.errors import DynadeskError
    from app.core.next_round.leaderboard import fill_leaderboard

    try:
        report = fill_leaderboard(desk, task_code, progress=_progress())
    except DynadeskError as exc:
        click.echo(f"The leaderboard was not updated: {exc} "
                   f"(`dynadesk rounds leaderboard --task {task_code}` tries again).", err=True)
        return
    click.echo(f"{report.summary()} See it with: dynadesk rounds leaderboard --task {task_code}")


@click.command("leaderboard")
@click.option("--task", "task_code", required=True)
@click.option("--refresh", is_flag=True, help="Also score again the stale cells (their split changed) and the failed ones.")
@click.option("--cached", is_flag=True, help="Only show what is stored: score nothing, not even missing cells.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), help="Also write an HTML page.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the board as JSON (every cell's figures and state).")
@pass_context
def leaderboard(obj: Context, task_code: str, refresh: bool, cached: bool, html_file: Path | None,
                json_file: Path | None) -> None:
    """Every model the task has had × every round's held-out split: accuracy, macro-F1 and the share
    of the round's validated fooling examples the model now gets right, with n and a 95 % interval.

    Missing cells are scored first (each model loaded once); cells whose split changed since they
    were scored are shown as stale until --refresh.
    """
    from app.core.errors import DynadeskError
    from app.core.next_round.leaderboard import fill_leaderboard, read_leaderboard
    from app.core.next_round.leaderboard_report import table_lines, write_html, write_json

    if refresh and cached:
        raise DynadeskError("--refresh scores cells and --cached scores none; choose one.")
    desk = obj.desk
    if cached:
        board = read_leaderboard(desk, task_code)
    else:
        report = fill_leaderboard(desk, task_code, refresh=refresh, progress=_progress())
        board = report.board
        if report.scored:
            click.echo(report.summary(), err=True)
    click.echo(f"{board.task_name} ({task_code}): model leaderboard on the rounds' held-out splits")
    for line in table_lines(board):
        click.echo(line)
    if html_file is not None:
        click.echo(f"Wrote {write_html(board, html_file)}")
    if json_file is not None:
        click.echo(f"Wrote {write_json(board, json_file)}")
