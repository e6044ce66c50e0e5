"""``dynadesk eval``: score models on every round, a data set and a functional test suite;
write evaluation.json (every case, prediction and figure) and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from app.cli.base import Context, pass_context
from app.core.errors import DynadeskError
from local_models.batch_run import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS


def parse_rounds(value: str) -> Literal["all"] | list[int] | None:
    value = value.strip().lower()
    if value in ("all", ""):
        return "all"
    if value == "none":
        return None
    try:
        numbers = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"'{value}' is not 'all', 'none' or round numbers such as 1,2.") from None
    return numbers


def parse_weights(values: tuple[str, ...]) -> dict[str, float]:
    weights = {}
    for value in values:
        name, _, number = value.partition("=")
        try:
            weights[name.strip()] = float(number)
        except ValueError:
            raise click.BadParameter(f"'{value}' is not NAME=NUMBER, as in performance=4.") from None
    return weights


@click.command("eval")
@click.option("--models", "model_specs", required=True,
              help="Comma-separated: default, round:N (that round's targets), a model's name, id or checksum "
                   "prefix; join with + for an ensemble (a+b).")
@click.option("--task", "task_code", default="hate_speech", show_default=True)
@click.option("--rounds", "rounds_", default="all", show_default=True,
              help="Rounds whose validated examples to score: all, none, or numbers such as 1,2.")
@click.option("--include-unvalidated", is_flag=True, help="Also score submitted examples not yet validated (author's label).")
@click.option("--suite", type=click.Path(dir_okay=False), help="A functional test suite in HateCheck's CSV format.")
@click.option("--adaptive-suite/--no-adaptive-suite", default=True, show_default=True,
              help="Score the task's adaptive suite (its validated variants), per topic family too; only the variants "
                   "of held-out seeds when a scored model trained on validated variants.")
@click.option("--data", "data_file", type=click.Path(dir_okay=False), help="A labelled data set (CSV or JSONL), e.g. a held-out split.")
@click.option("--text-column", help="The data file's text column (default: found by name).")
@click.option("--label-column", help="The data file's label column (default: found by name).")
@click.option("--weight", "weights", multiple=True, metavar="NAME=VALUE",
              help="Score weight for performance, throughput, memory, fairness or robustness (default 4,1,1,1,1).")
@click.option("--training-data", type=click.Path(dir_okay=False),
              help="The models' training file, when their records do not say where it is (for the overlap check).")
@click.option("--training-text-column", help="The training file's text column (default: the recorded one, or found by name).")
@click.option("--no-identity-swap", is_flag=True, help="Skip the identity-swap test.")
@click.option("--no-robustness", is_flag=True, help="Skip the spelling perturbations.")
@click.option("--sample", type=int, default=300, show_default=True,
              help="Cases sampled for identity swaps and for spelling perturbations (0: all).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, show_default=True,
              help=f"Texts per batch (at most {DEFAULT_MAX_BATCH_TOKENS} padded tokens each).")
@click.option("--threads", type=int,
              help="Threads per model (default: every core when the machine is idle, else as the desk: one per two cores).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder for evaluation.json and report.html.")
@pass_context
def eval_(obj: Context, model_specs: str, task_code: str, rounds_: str, include_unvalidated: bool, suite: str | None,
          adaptive_suite: bool, data_file: str | None, text_column: str | None, label_column: str | None, weights: tuple[str, ...],
          training_data: str | None, training_text_column: str | None, no_identity_swap: bool, no_robustness: bool,
          sample: int, seed: int, batch_size: int, threads: int | None, out_dir: str) -> None:
    """Score models on every round, a data set, a HateCheck suite and the task's adaptive suite; write JSON and
    an HTML report.

    \b
    dynadesk eval --models default --rounds all \\
        --suite ../shared/data/hatecheck/test_suite_cases_dev.csv --out eval-out
    """
    from app.core.io.documents import write_document
    from app.core.services.evaluation import EvaluationOptions, evaluate
    from app.core.services.evaluation_data import read_hatecheck_suite, read_labelled_file, round_sets
    from app.core.services.evaluation_models import resolve_models
    from app.core.services.evaluation_report import write_html
    from app.core.services.evaluation_scoring import summary_lines
    from local_models.batch_run import batch_threads
    from local_models.progress import Progress

    if batch_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--batch-size")
    if training_data and not Path(training_data).is_file():
        raise DynadeskError(f"There is no training data file at {training_data}.")
    options = EvaluationOptions(
        weights=parse_weights(weights), identity_swap=not no_identity_swap, robustness=not no_robustness,
        swap_cases=sample or None, robustness_cases=sample or None, seed=seed, batch_size=batch_size,
        num_threads=threads or batch_threads(), training_data=training_data,
        training_text_column=training_text_column,
    )
    desk = obj.desk
    sets = []
    chosen_rounds = parse_rounds(rounds_)
    if chosen_rounds is not None:
        sets += round_sets(desk, task_code, chosen_rounds, include_unvalidated=include_unvalidated)
    if suite:
        sets.append(read_hatecheck_suite(Path(suite)))
    if data_file:
        sets.append(read_labelled_file(Path(data_file), text_column=text_column, label_column=label_column))
    choices = resolve_models(desk, [s for s in (p.strip() for p in model_specs.split(",")) if s], task_code)
    adaptive = _adaptive_split(desk, task_code, choices) if adaptive_suite else None
    if adaptive is not None:
        sets.append(adaptive.eval_set)
    counted = "submitted" if include_unvalidated else "validated"  # what a round's set holds
    for s in sets:
        if not s.cases:
            click.echo(f"{s.name}: no {counted} examples yet; left out", err=True)
        else:
            click.echo(f"{s.name}: {len(s.cases)} cases" + (f", {len(s.pairs)} pairs" if s.pairs else ""), err=True)

    if not any(s.cases for s in sets):  # say which rounds were looked in, and for what
        rounds_seen = ", ".join(s.name for s in sets if s.kind == "round") or "any round"
        raise DynadeskError(f"There is nothing to evaluate on: no {counted} example in {rounds_seen}, and no "
                            "suite or data file was given.")
    last = [-1]

    def report(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if percent >= last[0] + 10 or (done == total and percent != last[0]):
            last[0] = percent
            click.echo(f"  {percent}%", err=True)

    doc = evaluate(choices, sets, options, task_code=task_code, desk=desk,
                   progress=Progress(report, lambda text: click.echo(text, err=True)))
    from app.core.next_round.leaderboard import leaderboard_document
    from app.core.next_round.leaderboard_report import evaluation_sections

    if adaptive is not None:
        doc["adaptive_suite"] = _adaptive_document(adaptive, doc)
        doc["notes"].append(adaptive.rule)
    board = leaderboard_document(desk, task_code)  # as stored: `dynadesk rounds leaderboard` fills it
    if board is not None:
        doc["leaderboard"] = board
    out = Path(out_dir)
    json_path = write_document(doc, out / "evaluation.json")
    html_path = write_html(doc, out / "report.html", blur_words=desk.reading_words(task_code, browsing=True),
                           sections=evaluation_sections(doc))
    for warning in doc["warnings"]:
        click.secho(warning, fg="red", bold=True, err=True)
    for note in doc["notes"]:
        click.echo(f"Note: {note}", err=True)
    click.echo("\n".join(summary_lines(doc)))
    for line in _family_lines(doc.get("adaptive_suite"), {m["key"]: m["name"] for m in doc["models"]}):
        click.echo(line)
    click.echo(f"Wrote {json_path} and {html_path}")


def _adaptive_split(desk, task_code: str, choices):
    """The task's adaptive suite as one more set (None when it has no validated variant): every validated variant,
    or those of held-out seeds when a scored model trained on validated variants."""
    from app.core.next_round.suite_split import adaptive_suite_split, trained_on_variants

    records = [r for choice in choices for r in choice.records]
    split = adaptive_suite_split(desk, task_code, held_out_only=trained_on_variants(None, records))
    return split if split.validated else None


def _adaptive_document(adaptive, doc: dict) -> dict:
    """The suite's rule and per topic family each model's wrong answers (``score_suite``)."""
    from app.core.next_round.suite_split import family_rows

    key = adaptive.eval_set.key
    labels = {m["key"]: {case_id: p["label"] for case_id, p in m["predictions"].get(key, {}).items()}
              for m in doc["models"]}
    cases = adaptive.eval_set.cases
    return {**adaptive.to_json(), "families": family_rows(cases, labels) if cases else []}


def _family_lines(adaptive: dict | None, names: dict[str, str]) -> list[str]:
    """Per topic family: n and each model's wrong answers, for the terminal."""
    if not adaptive or not adaptive.get("families"):
        return []
    lines = ["Adaptive suite per topic family (wrong of n):"]
    for row in adaptive["families"]:
        cells = ", ".join(f"{names.get(key, key)} {row[key]['wrong']}" for key in names if key in row)
        lines.append(f"  {row['family']} (n={row['n']}): {cells}")
    return lines
