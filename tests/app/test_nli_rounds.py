"""A pair task closes its round from the desk: `dynadesk train --task nli` learns from decided (premise,
hypothesis) examples and pair base data, writes a manifest, and the comparison and the promotion take the
candidate as they take a single-text one. Extractive QA is refused in one sentence naming what is missing."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.core.domain import Role
from app.core.next_round.comparison import BaseTestOptions, compare_candidate
from app.core.next_round.promotion import PromotionRefused, promote_candidate
from app.core.next_round.training_data import TrainingDataError, training_set
from local_models.engine import load_engine
from local_models.train import LabelledData
from tests.model_fixtures import NLI_LABELS, nli_round_one

TASK = "nli"
TINY = ["--epochs", "2", "--batch-size", "16", "--max-length", "48", "--threads", "1", "--learning-rate", "2e-3"]


def run_cli(data_dir, capsys, *args) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["--data-dir", str(data_dir), *map(str, args)])
    captured = capsys.readouterr()
    return stopped.value.code, captured.out + captured.err


def test_nli_trains_from_the_desk_on_pairs_and_is_compared_and_promoted(desk, people, data_dir, tmp_path, capsys,
                                                                       tiny_base_dir, nli_base_and_target):
    base, target_dir = nli_base_and_target
    target, examples = nli_round_one(desk, target_dir, people.author, people.lead)
    # the training set holds what the model reads: (context, hypothesis) pairs, de-duplicated by both texts
    data = training_set(desk, TASK, [1])
    assert data.train and data.held_out
    assert all(isinstance(e.text, tuple) and len(e.text) == 2 for e in data.train + data.held_out)
    first = next(e for e in data.train + data.held_out if e.id == str(examples[0].id))
    assert first.text == (examples[0].inputs["context"], examples[0].inputs["hypothesis"])

    out = tmp_path / "next"
    code, output = run_cli(data_dir, capsys, "train", "--task", TASK, "--rounds", "1", "--base", base,
                           "--context-column", "premise", "--text-column", "hypothesis", "--label-column", "label",
                           "--encoder", tiny_base_dir, "--out", out, *TINY)
    assert code == 0, output
    assert "Started from the target" in output and "Left out: undecided 3" in output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == TASK and manifest["labels"] == NLI_LABELS and manifest["parent"]["kind"] == "target"
    assert manifest["options"]["base_data"]["context_column"] == "premise"
    splits = manifest["data"]["splits"]
    assert len(splits["train"]) + len(splits["held_out"]) == 42 and len(splits["base"]) == 150
    assert set(manifest["data"]["hashes"]) == set(splits["train"]) | set(splits["held_out"]) | set(splits["base"])
    assert manifest["metrics"]["test"]["examples"] == len(splits["base_test"]) > 0
    assert manifest["metrics"]["held_out"]["examples"] == len(splits["held_out"])
    cache = manifest["frozen_cache"]
    assert cache["used"] and cache["computed"] == cache["texts"] == 150 + 42
    engine = load_engine(out / manifest["output"]["model"], num_threads=1)
    try:
        assert engine.predict_one(("The cat sleeps in the barn.", "The cat never sleeps.")).label in NLI_LABELS
    finally:
        engine.close()

    # the same run again takes every pair's frozen states from the cache and gives the same weights
    again = tmp_path / "again"
    code, output = run_cli(data_dir, capsys, "train", "--manifest", out / "manifest.json", "--out", again)
    assert code == 0, output
    redone = json.loads((again / "manifest.json").read_text(encoding="utf-8"))
    assert redone["frozen_cache"]["from_cache"] == cache["texts"] and redone["frozen_cache"]["computed"] == 0
    assert (again / "model" / "model.safetensors").read_bytes() == (out / "model" / "model.safetensors").read_bytes()

    # comparison: round 1's held-out pairs and the base file's test split, read as pairs
    report = compare_candidate(desk, TASK, out, base_test=base, resamples=200, num_threads=1,
                               base_options=BaseTestOptions("hypothesis", "label", context_column="premise"))
    items = {d.split: d.items for d in report.differences if d.metric == "accuracy"}
    assert items["held-out-1"] == len(splits["held_out"]) and items["base-test"] == len(splits["base_test"])
    base_split = next(s for s in report.document["splits"] if s["key"] == "base-test")
    assert all(item["candidate"]["label"] in NLI_LABELS for item in base_split["items"])
    with pytest.raises(Exception, match="context column"):
        compare_candidate(desk, TASK, out, base_test=base, resamples=200, num_threads=1,
                          base_options=BaseTestOptions("hypothesis", "label"))

    owner = desk.people.create("Olga Owner", Role.OWNER)
    desk.switch_person(owner.id)
    with pytest.raises(PromotionRefused, match="no split has enough examples"):  # a fixture's few pairs judge nothing
        promote_candidate(desk, TASK, out, comparison=report)
    promotion = promote_candidate(desk, TASK, out, comparison=report, force=True,
                                  reason="a fixture of 150 pairs: too few to judge, promoted to test the path")
    assert promotion.round_number == 2
    assert [m.sha256 for m in promotion.targets] == [promotion.candidate.sha256]
    assert promotion.lineage["manifest"] and promotion.lineage["comparison"]
    assert desk.tasks.round(TASK).number == 2


def test_pair_base_data_must_match_the_task(desk, tmp_path):
    pairs = LabelledData([("a premise", "a hypothesis"), ("another", "one")], [0, 2], NLI_LABELS)
    with pytest.raises(TrainingDataError, match="reads single texts"):
        training_set(desk, "hate_speech", [1], base=LabelledData(pairs.texts, [0, 1], ["hate", "not hate"]))
    with pytest.raises(TrainingDataError, match=r"reads \(context, hypothesis\) pairs; name the base data's context"):
        training_set(desk, TASK, [1], base=LabelledData(["just a text", "another"], [0, 2], NLI_LABELS))


def test_extractive_qa_is_refused_in_one_sentence_naming_the_span_head(desk, data_dir, tmp_path, capsys):
    sentence = ("The task 'extractive_qa' is extractive QA: training from the desk trains classification heads only, "
                "not the span head (answer start and end positions) a QA model needs.")
    with pytest.raises(TrainingDataError) as refused:
        training_set(desk, "extractive_qa", [1])
    assert str(refused.value) == sentence
    code, output = run_cli(data_dir, capsys, "train", "--task", "extractive_qa", "--rounds", "1",
                           "--out", tmp_path / "qa")
    assert code != 0 and sentence in " ".join(output.split())
    assert not (tmp_path / "qa").exists()
