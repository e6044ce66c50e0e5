"""``dynadesk rounds propose | proposals | promote | decline | policy``: a lead's trained candidate goes to
the owner through the sync server, and the owner promotes it in one command (``sync.proposals``)."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli.base import Context, format_table, pass_context
from app.core.errors import DynadeskError


def _offline(exc: Exception, what: str) -> DynadeskError:
    return DynadeskError(f"{exc} {what}")


def _interval(d) -> str:
    from app.core.next_round.comparison import signed_points

    if d.difference is None:
        return "-"
    return f"{signed_points(d.difference)} [{signed_points(d.low)}, {signed_points(d.high)}]"


def _progress():
    from local_models.progress import Progress

    return Progress(on_message=lambda text: click.echo(text, err=True))


@click.command("propose")
@click.option("--task", "task_code", required=True)
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder `dynadesk train --out DIR` wrote (with its manifest.json).")
@click.option("--comparison", "comparison_file", type=click.Path(path_type=Path),
              help="A comparison report (comparison.json, or its folder). Default: compare now on this desk.")
@click.option("--note", help="A line for the owner.")
@pass_context
def rounds_propose(obj: Context, task_code: str, model_dir: Path, comparison_file: Path | None,
                   note: str | None) -> None:
    """Leads: offer a trained candidate to the task's owner, with its manifest and comparison report."""
    from app.core.next_round.comparison import NothingToCompare, compare_candidate
    from sync.proposals import candidate_files, propose_candidate
    from sync.transport import Offline

    desk = obj.desk
    candidate_files(model_dir)  # a wrong folder is named before any comparison
    comparison = comparison_file
    if comparison is None:
        try:
            comparison = compare_candidate(desk, task_code, model_dir, progress=_progress())
        except NothingToCompare as exc:
            click.echo(f"{exc} The proposal goes without a comparison; the owner's desk compares it.", err=True)
    with obj.sync_clients.configured() as client:
        try:
            summary = propose_candidate(desk, client, task_code, model_dir, comparison, note=note)
        except Offline as exc:
            raise _offline(exc, "Nothing was proposed; propose again when the server can be reached.") from exc
    click.echo(f"Proposed {summary.name} for {task_code}: proposal {summary.id} ({summary.files} files).")
    for line in summary.detail_lines()[:3]:
        click.echo(f"  {line}")
    click.echo(f"The owner promotes it with: dynadesk rounds promote --proposal {summary.id}")


@click.command("proposals")
@click.option("--task", "task_code", required=True)
@click.option("--all", "show_all", is_flag=True, help="Also promoted, declined and superseded proposals.")
@pass_context
def rounds_proposals(obj: Context, task_code: str, show_all: bool) -> None:
    """A task's proposals: who, when, rounds trained on, the comparison's key figures with 95 % intervals."""
    from sync.proposals import list_proposals
    from sync.transport import Offline

    desk = obj.desk
    with obj.sync_clients.configured() as client:
        try:
            listing = list_proposals(desk, client, task_code)
        except Offline as exc:
            raise _offline(exc, "Proposals live on the server; list them when it can be reached.") from exc
    shown = [p for p in listing.proposals if show_all or p.state == "open"]
    rows = []
    for p in shown:
        figures = {d.metric: d for d in p.headline()}
        accuracy, f1 = figures.get("accuracy"), figures.get("macro_f1")
        rows.append([str(p.id), p.proposer, f"{p.created_at:%Y-%m-%d %H:%M}",
                     ",".join(map(str, p.rounds_trained_on)) or "-", accuracy.split if accuracy else "-",
                     _interval(accuracy) if accuracy else "-", _interval(f1) if f1 else "-",
                     accuracy.items if accuracy else "-",
                     p.state + (f" (round {p.promoted_round})" if p.promoted_round else "")])
    click.echo(format_table(["id", "by", "when (UTC)", "rounds", "compared on", "accuracy Δ [95% CI]",
                             "macro-F1 Δ [95% CI]", "n", "state"], rows))
    hidden = len(listing.proposals) - len(shown)
    if hidden:
        click.echo(f"({hidden} decided or superseded; --all shows them)")
    click.echo(f"Leads may promote {task_code} themselves: {'yes' if listing.leads_may_promote else 'no'}.")


@click.command("promote")
@click.option("--proposal", "proposal_id", required=True, help="The id `dynadesk rounds proposals` lists.")
@click.option("--with-current", is_flag=True, help="Keep the current target(s) in an ensemble after the candidate.")
@click.option("--force", is_flag=True, help="Promote anyway when the promotion rule refuses the candidate; needs "
                                            "--reason (recorded with the figures).")
@click.option("--reason", help="Why the candidate is promoted over the rule's refusal (with --force).")
@pass_context
def rounds_promote(obj: Context, proposal_id: str, with_current: bool, force: bool, reason: str | None) -> None:
    """Owners (or leads, where the task allows): promote a proposal in one action.

    Downloads its files and checks each sha256, compares the candidate again on this desk, opens the next
    round with it (refused by the promotion rule unless --force --reason "why"), publishes the round and marks
    the proposal promoted.
    """
    from sync.proposals import promote_proposal
    from sync.transport import Offline

    desk = obj.desk
    with obj.sync_clients.configured() as client:
        try:
            outcome = promote_proposal(desk, client, proposal_id, with_current=with_current, force=force,
                                       reason=reason, progress=_progress())
        except Offline as exc:
            raise _offline(exc, "Nothing changed on this desk; promote the proposal when the server can be "
                                "reached.") from exc
    for line in outcome.summary_lines():
        click.echo(line)


@click.command("decline")
@click.option("--proposal", "proposal_id", required=True)
@click.option("--reason", required=True, help="Why; the lead reads it.")
@pass_context
def rounds_decline(obj: Context, proposal_id: str, reason: str) -> None:
    """Owners: decline a proposal, saying why."""
    from sync.proposals import decline_proposal
    from sync.transport import Offline

    with obj.sync_clients.configured() as client:
        try:
            summary = decline_proposal(client, proposal_id, reason)
        except Offline as exc:
            raise _offline(exc, "Nothing was declined; decline it when the server can be reached.") from exc
    click.echo(f"Declined proposal {summary.id} ({summary.name} by {summary.proposer}).")


@click.command("policy")
@click.option("--task", "task_code", required=True)
@click.option("--leads-may-promote", type=click.Choice(["yes", "no"]),
              help="Whether leads may promote a candidate and publish the round themselves. Without: show it.")
@pass_context
def rounds_policy(obj: Context, task_code: str, leads_may_promote: str | None) -> None:
    """Owners: who may promote a task's candidates (kept on the server, which enforces it; desks pull it)."""
    from app.core.next_round.promotion import promotion_policy
    from sync.proposals import pull_policies, set_promotion_policy
    from sync.transport import Offline

    desk = obj.desk
    desk.tasks.definition_by_code(task_code)
    with obj.sync_clients.configured() as client:
        try:
            if leads_may_promote is None:
                pull_policies(desk, client)
                policy = promotion_policy(desk, task_code)
            else:
                policy = set_promotion_policy(desk, client, task_code, leads_may_promote == "yes")
        except Offline as exc:
            raise _offline(exc, "The policy lives on the server; set it when the server can be reached.") from exc
    who = f" (set by {policy.set_by})" if policy.set_by else ""
    click.echo(f"Leads may promote {task_code}: {'yes' if policy.leads_may_promote else 'no'}{who}.")


COMMANDS = (rounds_propose, rounds_proposals, rounds_promote, rounds_decline, rounds_policy)
