"""``dynadesk exposure``: exposure to hateful content leaves a desk only as team aggregates."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import click

from app.cli.base import Context, pass_context
from app.core.domain import utcnow
from app.core.wellbeing.aggregate import MIN_GROUP, team_days, write_csv
from app.core.wellbeing.exposure import local_day


@click.group("exposure")
def exposure() -> None:
    """Exposure to hateful content: team aggregates only."""


@exposure.command("export")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--days", type=click.IntRange(1, 3660), default=30, show_default=True,
              help="The last N days, ending today (this desk's time zone).")
@click.option("--until", "until", type=click.DateTime(["%Y-%m-%d"]), help="The last day (default: today).")
@click.option("--min-group", type=click.IntRange(2, 1000), default=MIN_GROUP, show_default=True,
              help="A team-day with fewer people is withheld: its figures left blank.")
@pass_context
def export(obj: Context, out: Path, days: int, until, min_group: int) -> None:
    """Write minutes with hateful content per team and day (writing, validating, reviewing), breaks and
    how many people went over the team's daily limit, as CSV. Never a row per person: a team-day of
    fewer than --min-group people is withheld."""
    desk = obj.desk
    last: date = until.date() if until else local_day(utcnow(), desk.exposure.zone)
    first = last - timedelta(days=days - 1)
    rows = team_days(desk.exposure.person_days(first, last), desk.exposure.teams(), desk.exposure.limits())
    withheld = write_csv(rows, out, min_group)
    click.echo(f"Wrote {len(rows)} team-day(s) from {first} to {last} to {out}"
               + (f"; {withheld} withheld (fewer than {min_group} people)." if withheld else "."))
