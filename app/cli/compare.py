"""``dynadesk rounds compare``: a candidate model against the open round's target(s), before promoting it.

Registered on the ``rounds`` group in app/cli/__init__.py (kept out of rounds.py, which the
round commands grow).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.cli.base import format_table, pass_context

# A script can chain `rounds compare … && rounds promote …`: a refused candidate is not a success.
REFUSED_EXIT = 4


def _points(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}"


@click.command("compare")
@click.option("--task", "task_code", required=True, help="The task whose open round's target is compared against.")
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False),
              help="The candidate: the folder `dynadesk train --out` wrote, or a model folder.")
@click.option("--rounds", "rounds_spec", help="Rounds whose held-out splits to compare on, as 1,2 (default: all).")
@click.option("--base-test", "base_test", type=click.Path(exists=True, dir_okay=False),
              help="The base data (CSV); its seeded, stratified test split is compared on.")
@click.option("--text-column", help="The base data's text column (a pair task's written text: e.g. hypothesis).")
@click.option("--context-column", help="A pair task's base data: its context column (e.g. premise).")
@click.option("--label-column", help="The base data's label column.")
@click.option("--label-map", help='Map the base data\'s label values to label names: "0=hate,1=not hate,2=not hate".')
@click.option("--html-unescape", is_flag=True, help="Decode HTML entities (&amp; and so on) in the base texts.")
@click.option("--base-split", type=click.Choice(["test", "all"]), default="test", show_default=True,
              help="Score the base data's test split (as dynadesk train splits it) or every row.")
@click.option("--split-seed", type=int, default=13, show_default=True,
              help="The seed dynadesk train split the base data with.")
@click.option("--suite", type=click.Path(exists=True, dir_okay=False), help="A HateCheck-format suite (CSV).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resamples.")
@click.option("--resamples", type=int, default=2000, show_default=True, help="Bootstrap resamples per interval.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write comparison.json and comparison.html here.")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON instead of a table.")
@pass_context
def compare(obj, task_code: str, model_dir: str, rounds_spec: str | None, base_test: str | None,
            text_column: str | None, context_column: str | None, label_column: str | None, label_map: str | None,
            html_unescape: bool, base_split: str, split_seed: int, suite: str | None, seed: int, resamples: int, out_dir: str | None,
            as_json: bool) -> None:
    """Compare a candidate model with the open round's target(s) on every round's held-out split (as the
    candidate's training held it out), the base data's test split (default: the one its manifest names),
    every suite of the task (and --suite) and the adaptive suite of validated variants (per topic family too;
    only the variants of held-out seeds when a compared model trained on variants); each difference has a
    paired bootstrap 95 % interval, and the promotion rule's verdict names the worst split. Exits 4 when the
    rule refuses the candidate."""
    from app.cli.models import _label_map_option, _progress
    from app.core.next_round.comparison import BaseTestOptions, compare_candidate
    from app.core.next_round.comparison_report import FAMILY_HEADERS, family_table_rows, write_report
    from app.core.next_round.round_training import parse_rounds

    base_options = None
    if base_test:
        if not text_column or not label_column:
            raise click.UsageError("--base-test needs --text-column and --label-column (and --label-map when "
                                   "its labels are codes), as dynadesk train does.")
        base_options = BaseTestOptions(text_column, label_column, _label_map_option(label_map), html_unescape,
                                       "all" if base_split == "all" else "test", split_seed, context_column or None)
    elif text_column or label_column or label_map or context_column:
        raise click.UsageError("--text-column, --context-column, --label-column and --label-map describe --base-test; "
                               "give it too.")
    if resamples < 100:
        raise click.BadParameter("use at least 100 resamples.", param_hint="--resamples")
    report = compare_candidate(obj.desk, task_code, Path(model_dir), rounds=parse_rounds(rounds_spec) if rounds_spec else None,
                               base_test=Path(base_test) if base_test else None, suite=Path(suite) if suite else None,
                               seed=seed, resamples=resamples, progress=_progress(), base_options=base_options)
    written = write_report(report, Path(out_dir), blur_words=obj.desk.reading_words(task_code, browsing=True)) \
        if out_dir else None
    if as_json:
        click.echo(json.dumps({"task": report.task_code, "candidate_sha256": report.candidate_sha256,
                               "current_sha256s": list(report.current_sha256s), "worse": report.worse,
                               "verdict": report.document.get("verdict"),
                               "pooled": report.document["pooled"], "differences": report.document["differences"],
                               "adaptive_suite": report.document.get("adaptive_suite"),
                               "files": [str(p) for p in written] if written else None}, indent=2))
        _exit_if_refused(report)
        return
    rows = [[d.split, d.metric, "-" if d.current is None else f"{d.current:.3f}",
             "-" if d.candidate is None else f"{d.candidate:.3f}",
             f"{_points(d.difference)} [{_points(d.low)}, {_points(d.high)}]", d.items] for d in report.differences]
    click.echo(format_table(["split", "metric", "current", "candidate", "difference, points [95% interval]", "n"], rows))
    for line in report.summary_lines():  # the promotion rule's verdict, then every split it judged
        click.echo(line)
    adaptive = report.document.get("adaptive_suite")
    if adaptive:
        click.echo(adaptive["rule"])
        rows = family_table_rows(adaptive)
        if rows:
            click.echo(format_table(FAMILY_HEADERS, rows))
    for warning in report.document["evaluation"]["warnings"]:
        click.echo(f"Warning: {warning}", err=True)
    if written:
        click.echo(f"Wrote {written[0]} and {written[1]}")
    _exit_if_refused(report)


def _exit_if_refused(report) -> None:
    if report.verdict.refused:
        click.get_current_context().exit(REFUSED_EXIT)

