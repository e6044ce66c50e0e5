"""Make the default model's int8 recipe: ``python -m local_models.quantize_default``.

Reads the data the trained part was trained on (Davidson et al. 2017, from ../shared/data; it is
never copied into the project), rebuilds its recorded split, finds the int8 recipe on the held-out
texts (dev + test) and writes ``int8_recipe.json`` beside the trained part: the recipe, its parity
figures, the sha256 of the int8 graph and its answers on the project's check texts (never on the data's,
which stay out of the repository). Desks build that graph and use it when its bytes or its answers match.

    python -m local_models.quantize_default [--data CSV] [--part resources/models/hate_speech_r1]
    python -m local_models.quantize_default --add-check   # check texts for a recipe made before them
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from local_models.errors import ModelError
from local_models.files import file_sha256
from local_models.int8_form import add_int8_check, record_int8_recipe, split_texts
from local_models.int8_search import RECIPE_FILE, TaskTexts
from local_models.progress import Progress
from local_models.train import LabelledData, TrainingConfig, labelled_data, read_part_description, stratified_split

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PART = ROOT / "resources" / "models" / "hate_speech_r1"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "davidson2017" / "labeled_data.csv"


def training_data(part_dir: Path, data_path: Path) -> tuple[LabelledData, TrainingConfig]:
    """The part's training data, read as its description records; ``ModelError`` when it is not that file."""
    training = read_part_description(part_dir)["training"]
    recorded = training["data"]
    if not data_path.is_file():
        raise ModelError(f"There is no data file at {data_path}; give the file {recorded['file']} with --data.")
    if file_sha256(data_path) != recorded["sha256"]:
        raise ModelError(f"{data_path} is not the file the model was trained on (sha256 {recorded['sha256'][:12]}...).")
    with open(data_path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        data = labelled_data(data_path, reader.fieldnames or [], reader, recorded["text_column"],
                             recorded["label_column"], label_map=recorded.get("label_map"),
                             unescape_html=bool(recorded.get("html_unescaped")),
                             drop_duplicates="duplicates_dropped" in recorded)
    fields = TrainingConfig.__dataclass_fields__
    config = TrainingConfig(**{k: v for k, v in training["config"].items() if k in fields})
    return data, config


def default_task_texts(part_dir: Path = DEFAULT_PART, data_path: Path = DEFAULT_DATA) -> TaskTexts:
    data, config = training_data(part_dir, data_path)
    train, dev, test = stratified_split(data.labels, config)
    texts = split_texts(data.texts, train, list(dev) + list(test), f"{data.source['file']} dev + test split",
                        seed=config.seed)
    return replace(texts, shareable=False)  # the recipe lives in the repository: no tweet goes into its check


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the CSV file the part was trained on")
    parser.add_argument("--part", type=Path, default=DEFAULT_PART, help="the trained part's folder")
    parser.add_argument("--add-check", action="store_true",
                        help="only record check texts in the existing recipe (its graph must rebuild byte for byte)")
    args = parser.parse_args(argv)
    progress = Progress(on_message=lambda text: print(text, file=sys.stderr))
    if args.add_check:
        try:
            check = add_int8_check(args.part, progress=progress)
        except (ModelError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {len(check['texts'])} check texts to {args.part / RECIPE_FILE}")
        return 0
    try:
        texts = default_task_texts(args.part, args.data)
        search = record_int8_recipe(args.part, texts, progress=progress)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{'stage':<10} {'texts':>6} {'agree':>8} {'changed':>7} {'p99':>7} {'max':>7}  recipe")
    for a in search.attempts:
        print(f"{a['stage']:<10} {a['texts']:>6} {a['agreement']:>8.4f} {a['labels_changed']:>7} "
              f"{a['p99_change']:>7.4f} {a['max_change']:>7.4f}  {a['recipe']}{' PASSED' if a['passed'] else ''}")
    print(f"wrote {args.part / RECIPE_FILE}: " + (search.recipe.name if search.recipe is not None else search.reason))
    return 0 if search.passed else 2


if __name__ == "__main__":
    sys.exit(main())
