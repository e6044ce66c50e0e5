"""``dynadesk suggest``: the writing assistant at the command line. Suggested edits of a text,
each checked against the round's target (or ensemble) and ranked, as a table or JSON, for leads
who script experiments with it."""

from __future__ import annotations

import json

import click

from app.cli.base import Context, format_table, pass_context
from app.core.errors import DynadeskError

DEFAULT_TOP = 10


def _inputs(definition, text: str, context: str | None) -> dict[str, str]:
    from app.core.tasks.definition import InputKind

    written = [f for f in definition.inputs if f.kind == InputKind.WRITTEN]
    contexts = [f for f in definition.inputs if f.kind == InputKind.CONTEXT]
    if contexts and not (context or "").strip():
        raise DynadeskError(f"{definition.name} reads a {contexts[0].label.lower()} with your "
                            f"{written[0].label.lower()}: give it with --context TEXT.")
    if context and not contexts:
        raise DynadeskError(f"{definition.name} has no context: leave --context out.")
    fields = {written[0].name: text}
    if contexts:
        fields[contexts[0].name] = context or ""
    return fields


def suggestion_json(rank: int, s) -> dict:
    c = s.candidate
    return {"rank": rank, "text": c.text, "generator": c.generator.value, "edit_type": c.edit_type, "note": c.note,
            "claimed_label": c.claimed_label, "predicted": s.predicted,
            "probabilities": {k: round(float(v), 6) for k, v in s.probabilities.items()},
            "fools": s.fools, "shift": round(float(s.shift), 6)}


@click.command("suggest")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int, help="The round whose target checks the edits (default: the open one).")
@click.option("--goal", type=click.Choice(["fool", "contrast"]), default="fool", show_default=True,
              help="fool: keep the label and change the model's answer; contrast: change the true label.")
@click.option("--label", "label", help="fool: the text's true label (default: the model's answer); "
                                       "contrast: the label the edit should make true.")
@click.option("--text-label", "text_label",
              help="contrast: the text's label as it stands (default: the model's answer, or in a two-label task "
                   "the label other than --label).")
@click.option("--context", "context", help="The context (premise) for tasks that have one, such as NLI.")
@click.option("--top", type=click.IntRange(1, 64), default=DEFAULT_TOP, show_default=True,
              help="Suggestions to print.")
@click.option("--slurs", is_flag=True, help="Also offer description → slur edits (slurs you did not type; "
              "off unless asked).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.argument("text")
@pass_context
def suggest(obj: Context, task_code: str, number: int | None, goal: str, label: str | None, text_label: str | None,
            context: str | None, top: int, slurs: bool, as_json: bool, text: str) -> None:
    """Suggested edits of TEXT, each checked against the round's target, fooling ones first.

    \b
    dynadesk suggest --task hate_speech "I hate women."
    dynadesk suggest --task hate_speech --goal contrast --label "not hate" --json "I hate women."
    dynadesk suggest --task nli --context "A man sleeps." --goal contrast "A man is sleeping."
    """
    from app.core.assist.pipeline import AssistError, written_segment
    from app.core.assist.pipeline import suggest as run_suggest
    from app.core.assist.types import Goal
    from app.core.domain import ModelFormat
    from app.core.services.target_models import load_ensemble, model_input
    from app.core.text import clean_text, control_characters

    text = clean_text(text)
    if not text.strip():
        raise DynadeskError('The text is empty: give the text to suggest edits for, as in '
                            'dynadesk suggest --task hate_speech "I hate women."')
    if control_characters(text):
        raise DynadeskError(f"The text holds control characters ({', '.join(control_characters(text))}); "
                            "remove them and try again.")
    desk = obj.desk
    definition = desk.tasks.definition_by_code(task_code)  # names the known tasks when it is not one
    try:
        written_segment(definition)  # refuses extractive tasks before any model loads
    except AssistError as exc:
        raise DynadeskError(str(exc)) from exc
    for given in (label, text_label):
        if given is not None and given not in definition.labels:
            raise DynadeskError(f"'{given}' is not a label of {definition.name}; its labels: "
                                f"{', '.join(repr(x) for x in definition.labels)}.")
    if text_label is not None and goal == "fool":
        raise DynadeskError("--text-label is for the contrast goal; with --goal fool, --label is the text's label.")
    inputs = model_input(definition, _inputs(definition, text, context))
    round_ = desk.tasks.round(task_code, number)
    records = desk.models.round_models(round_.id)
    if not records:
        from app.core.services.target_models import needs_default_model

        first_start = task_code == "hate_speech" and round_.number == 1 and needs_default_model(desk)
        raise DynadeskError(f"Round {round_.number} of {task_code} has no target model to check suggestions "
                            f"against; attach one with `dynadesk rounds attach --task {task_code} "
                            f"--round {round_.number} --model NAME`"
                            + (" (or run `dynadesk init` to make the bundled default model its target)."
                               if first_start else "."))
    imported = [r.name for r in records if r.format == ModelFormat.IMPORTED.value]
    if imported:
        raise DynadeskError(f"Round {round_.number}'s target {', '.join(imported)} is known only by predictions "
                            "recorded elsewhere; it cannot check suggestions here.")
    lexicon = desk.tasks.assist_lexicon(task_code)
    models = load_ensemble(records)
    gradients = None
    try:
        writer_label = label
        if goal == "fool" and writer_label is None:
            writer_label = models.predict([inputs])[0].label
            if not as_json:
                click.echo(f"No --label: taking the model's answer '{writer_label}' as the text's true label.",
                           err=True)
        # word substitution: a member that has gradients (as the panel does), else the PyTorch form of
        # the first member exported from one; the ensemble still checks every suggestion
        member = next((engine for engine in models.engines if engine.supports_gradients), None)
        from app.core.assist.forms import first_gradient_form

        torch_record = None if member is not None else first_gradient_form(desk, records)
        if member is None and torch_record is None:
            torch_record = _fetched_gradient_form(obj, records)
        if torch_record is not None:
            from app.core.services.target_models import load_engine_for

            try:
                gradients = load_engine_for(torch_record)
            except DynadeskError as exc:  # substitution says it is unavailable; the rest still runs
                click.echo(f"Word substitution is left out: {exc}", err=True)
        try:
            result = run_suggest(models, definition, inputs, goal=Goal(goal), writer_label=writer_label,
                                 lexicon=lexicon, gradients=member if member is not None else gradients,
                                 rule=round_.fooled_rule, text_label=text_label, slurs=slurs)
        except AssistError as exc:
            raise DynadeskError(str(exc)) from exc
    finally:
        models.close()
        if gradients is not None:
            gradients.close()
    shown = result.suggestions[:top]
    if as_json:
        document = {"task": task_code, "round": round_.number, "models": [r.name for r in records], "goal": goal,
                    "label": writer_label, "text": text, "original_label": result.original_label,
                    "original": {k: round(float(v), 6) for k, v in result.original.items()},
                    "generated": result.generated, "checked": len(result.suggestions),
                    "fooling": len(result.fooling),
                    "suggestions": [suggestion_json(i, s) for i, s in enumerate(shown, 1)],
                    "unavailable": {g.value: reason.value for g, reason in result.unavailable.items()},
                    "timings_ms": {k: round(v, 1) for k, v in result.timings_ms.items()}}
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    labels = list(definition.labels)
    original = ", ".join(f"{name} {result.original.get(name, 0.0):.2f}" for name in labels)
    click.echo(f"{task_code} round {round_.number}, target {' + '.join(r.name for r in records)}")
    click.echo(f"Your text: the model says {result.original_label} ({original})")
    click.echo(f"{len(result.suggestions)} suggestions checked, {len(result.fooling)} fool the model"
               + (f"; the best {len(shown)}:" if shown else "."))
    if shown:
        rows = [[i, "yes" if s.fools else "no", s.candidate.edit_type, s.candidate.claimed_label or writer_label or "",
                 *(f"{s.probabilities.get(name, 0.0):.2f}" for name in labels), _printable(s.candidate.text)]
                for i, s in enumerate(shown, 1)]
        click.echo(format_table(["#", "fools", "edit", "label", *(f"p({name})" for name in labels), "text"], rows))
    for generator, reason in result.unavailable.items():
        click.echo(f"  {generator.value}: {reason.value}")


def _fetched_gradient_form(obj: Context, records):
    """On a team desk whose targets' PyTorch form is not here: that form from the team's server, as the
    assistant's panel fetches it (progress on stderr). None, with why on stderr, when it cannot come."""
    import time

    from sync.gradient_forms import fetch_gradient_form, gradient_source
    from sync.transport import SyncError, SyncHandle

    desk = obj.desk
    source = gradient_source(desk, records)
    if source is None or not desk.settings.server_url or not obj.sync_clients.token():
        return None
    click.echo(f"Fetching the PyTorch form of {source.target} from the team's server, for word substitution…",
               err=True)
    last = [0.0]

    def show(phase: str, done: int, total: int) -> None:
        if phase == "models" and total and (time.monotonic() - last[0] >= 0.5 or done >= total):
            last[0] = time.monotonic()
            click.echo(f"  {done:,} / {total:,} bytes", err=True)

    try:
        return fetch_gradient_form(desk, obj.sync_clients, source, handle=SyncHandle(on_progress=show))
    except SyncError as exc:
        click.echo(f"Word substitution is left out: {exc}", err=True)
        return None


def _printable(text: str) -> str:
    from app.core.text import printable

    return printable(text).replace("\n", " ")
