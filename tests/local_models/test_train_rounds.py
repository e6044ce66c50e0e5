"""`dynadesk train --task`: a tiny desk's decided examples plus base data, warm-started from the round's
target, written with a manifest that trains the same weights again, bit for bit."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass

import pytest
import torch
from safetensors.torch import load_file

from app.cli import main
from app.core.services.target_models import register_model
from app.core.tasks.splits import is_held_out
from local_models.engine import load_engine
from local_models.train_rounds import auto_round_weight
from tests.conftest import hate_content, hate_output
from tests.model_fixtures import LABELS, trigger_sentences

TINY = ["--epochs", "2", "--batch-size", "16", "--max-length", "32", "--threads", "1", "--learning-rate", "2e-3"]


@dataclass
class Run:
    exit_code: int
    output: str


@pytest.fixture
def dynadesk(capsys):
    """The CLI in-process, as `dynadesk` runs it: errors become messages and an exit status."""

    def run(data_dir, *args) -> Run:
        with pytest.raises(SystemExit) as stopped:
            main(["--data-dir", str(data_dir), *map(str, args)])
        captured = capsys.readouterr()
        return Run(stopped.value.code, captured.out + captured.err)

    return run


def round_one_and_base_data(desk, people, model_dir, tmp_path, decided: int = 43):
    """Round 1 of hate speech with a target and 48 trigger examples (the first ``decided`` decided by a lead), and
    a base data file of 160 rows: the examples, the target and the file."""
    target = register_model(desk, model_dir, task_code="hate_speech")
    assert desk.rounds.adopt_first_models("hate_speech", [target.id])
    examples = []
    for text, label in trigger_sentences(48, seed=21, labels=LABELS):
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                                       [hate_output(target, "not hate")])
        examples.append(example)
        if len(examples) <= decided:
            desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
    base = tmp_path / "base.csv"
    with open(base, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "kind"])
        writer.writerows(trigger_sentences(160, seed=22, labels=LABELS))
    return examples, target, base


def test_training_from_the_desk_is_reproduced_from_its_manifest(desk, people, data_dir, tmp_path, tiny_base_dir,
                                                               hate_trigger_model_dir, dynadesk):
    examples, target, base = round_one_and_base_data(desk, people, hate_trigger_model_dir, tmp_path)

    out = tmp_path / "next"
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--base", base,
                      "--text-column", "sentence", "--label-column", "kind", "--encoder", tiny_base_dir,
                      "--out", out, *TINY)
    assert result.exit_code == 0, result.output
    assert "Started from the target" in result.output and "Left out: undecided 5" in result.output
    # progress names each stage with its own counts: the frozen pass in texts, training in steps, then int8
    assert re.search(r"1 of 4: frozen layers — .* — [\d,]+ of [\d,]+ texts · ", result.output), result.output
    assert re.search(r"2 of 4: training — .* — [\d,]+ of [\d,]+ steps · ", result.output), result.output
    assert "3 of 4: assembling the model" in result.output and "4 of 4: int8 search" in result.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {"format", "dynadesk", "task", "rounds", "options", "config", "seed", "data", "parent", "encoder",
            "weighting", "output", "metrics"} <= set(manifest)
    assert manifest["dynadesk"]["version"] and manifest["dynadesk"]["revision"]
    assert manifest["parent"]["kind"] == "target" and manifest["parent"]["model_sha256"] == target.sha256
    splits = manifest["data"]["splits"]
    held = [str(e.id) for e in examples[:43] if is_held_out(e.id)]
    assert splits["held_out"] == held and not set(held) & set(splits["train"])
    assert len(splits["train"]) + len(held) + len(manifest["data"]["duplicates"]) == 43
    assert set(manifest["data"]["hashes"]) == set(splits["train"]) | set(held) | set(splits["base"])
    assert len(manifest["data"]["base_file"]["sha256"]) == 64 and manifest["seed"] == 13
    assert manifest["weighting"]["value"] == auto_round_weight(len(splits["base_train"]), len(splits["train"])) > 1
    assert manifest["metrics"]["test"]["examples"] == len(splits["base_test"])
    # the base file's own seeded split, whatever de-duplication left out: its test rows are never trained on
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, stratified_split

    file_test = stratified_split(read_labelled_csv(base, "sentence", "kind").labels, TrainingConfig())[2]
    assert splits["base_test"] == [f"base:{i}" for i in file_test if f"base:{i}" in set(splits["base"])]
    engine = load_engine(out / manifest["output"]["model"], num_threads=1)
    try:
        assert sorted(engine.head.label_map.values()) == LABELS
        assert engine.predict_one("my banana is red").label in LABELS
    finally:
        engine.close()

    again = tmp_path / "again"
    result = dynadesk(data_dir, "train", "--manifest", out / "manifest.json", "--out", again)
    assert result.exit_code == 0, result.output
    assert "Reproduced bit for bit" in result.output and "Same machine as recorded" in result.output
    first, second = (load_file(folder / "trained_part.safetensors") for folder in (out, again))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    # the tensors' bytes too (the file header's metadata order is the safetensors library's choice)
    assert all(first[k].numpy().tobytes() == second[k].numpy().tobytes() for k in first)
    assert (again / "model" / "model.safetensors").read_bytes() == (out / "model" / "model.safetensors").read_bytes()
    assert json.loads((again / "manifest.json").read_text())["data"] == manifest["data"]
    # the first run computed the frozen layers' outputs; the second took every one from the desk's cache
    cold, warm = manifest["frozen_cache"], json.loads((again / "manifest.json").read_text())["frozen_cache"]
    assert cold["used"] and cold["from_cache"] == 0 and cold["computed"] == cold["texts"] > 0
    assert warm["used"] and warm["from_cache"] == warm["texts"] == cold["texts"] and warm["computed"] == 0
    assert warm["folder"].startswith(str(data_dir / "cache" / "frozen-states"))
    # without the cache: computed afresh, kept nowhere, and the very same weights
    bare = tmp_path / "bare"
    result = dynadesk(data_dir, "train", "--manifest", out / "manifest.json", "--no-frozen-cache", "--int8", "later",
                      "--out", bare)
    assert result.exit_code == 0, result.output
    assert json.loads((bare / "manifest.json").read_text())["frozen_cache"]["used"] is False
    assert (bare / "model" / "model.safetensors").read_bytes() == (out / "model" / "model.safetensors").read_bytes()
    # --int8 later: three stages, the search left for after promotion with its texts kept beside the part
    assert "3 of 3: assembling the model" in result.output and "of 4:" not in result.output
    assert "int8 form: none. int8 form deferred" in result.output
    from local_models.int8_form import DEFERRED_TEXTS_FILE
    from local_models.int8_search import read_recipe_file

    assert read_recipe_file(bare).deferred and (bare / DEFERRED_TEXTS_FILE).is_file()

    desk.validation.validate(examples[-1].id, people.lead.id, "correct", mode="lead")  # the data moves on
    result = dynadesk(data_dir, "train", "--manifest", out / "manifest.json", "--out", tmp_path / "third")
    assert result.exit_code != 0 and "differs from the manifest" in result.output
    assert not (tmp_path / "third").exists()

    scratch = tmp_path / "scratch"
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--from", "base",
                      "--encoder", tiny_base_dir, "--out", scratch, *TINY)
    assert result.exit_code == 0, result.output
    alone = json.loads((scratch / "manifest.json").read_text(encoding="utf-8"))
    assert alone["parent"]["kind"] == "base" and alone["weighting"]["value"] == 1.0
    assert alone["data"]["splits"]["round_dev"] and not alone["data"]["splits"]["base"]


def test_desk_training_refuses_unclear_requests(desk, data_dir, tmp_path, dynadesk):
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--out", tmp_path / "x")
    assert result.exit_code != 0 and "--task needs --rounds" in result.output
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--data", __file__,
                      "--out", tmp_path / "x")
    assert result.exit_code != 0 and "Give one of --data CSV" in result.output
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--from", "target",
                      "--out", tmp_path / "x")
    assert result.exit_code != 0 and "no decided examples" in result.output
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--out", occupied)
    assert result.exit_code != 0 and "other files in it" in result.output
    assert (occupied / "keep.txt").read_text() == "mine"
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}", encoding="utf-8")
    result = dynadesk(data_dir, "train", "--manifest", manifest, "--epochs", "9", "--seed", "1", "--out",
                      tmp_path / "y")
    assert result.exit_code != 0 and "--seed, --epochs would be ignored" in result.output
    result = dynadesk(data_dir, "train", "--manifest", manifest, "--threads", "3", "--out", tmp_path / "y")
    assert result.exit_code != 0 and "--threads would be ignored" in result.output
    assert not (tmp_path / "y").exists()
