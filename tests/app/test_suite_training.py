"""Training on validated variants (`dynadesk train --variants [WEIGHT]`): what is taken (validated variants of the
chosen rounds' training-side seeds, never those of held-out seeds), their weight, the manifest that lists them and
trains the same weights again, and the data as training sees it without the flag."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from safetensors.torch import load_file

from app.cli import main
from app.core.errors import DynadeskError
from app.core.next_round.training_data import training_set
from app.core.next_round.variant_training import DEFAULT_VARIANT_WEIGHT, parse_variant_weight
from app.core.services.target_models import register_model
from tests.model_fixtures import LABELS, TRIGGER, trigger_sentences
from tests.suite_flow import HATE, add_variants, seeds_on_both_sides

TINY = ["--epochs", "2", "--batch-size", "16", "--max-length", "32", "--threads", "1", "--learning-rate", "2e-3"]


def run(capsys, data_dir, *args) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["--data-dir", str(data_dir), *map(str, args)])
    captured = capsys.readouterr()
    return int(stopped.value.code or 0), captured.out + captured.err


@pytest.fixture
def suite_round(desk, people, hate_trigger_model_dir, tmp_path):
    """Round 1 with a target, 4 training-side and 2 held-out seeds, each with 2 validated variants (and one
    unvalidated variant), and a base data file."""
    target = register_model(desk, hate_trigger_model_dir, task_code=HATE)
    assert desk.rounds.adopt_first_models(HATE, [target.id])
    vetter = desk.people.create("Vera Vetter", "lead")
    training, held = seeds_on_both_sides(desk, people.author, people.lead, target, training=4, held_out=2)
    variants: dict[str, list[str]] = {}
    for n, seed in enumerate(training + held):
        ids = add_variants(desk, people.lead, vetter, target, seed,
                           [(f"honestly the banana people {n} are awful", "hate"),
                            (f"they said {TRIGGER} folk {n} are awful", "hate")])
        variants[str(seed.id)] = [str(i) for i in ids]
    unvalidated = add_variants(desk, people.lead, vetter, target, training[0], [("a banana draft is awful", "hate")],
                               validate=False)
    base = tmp_path / "base.csv"
    with open(base, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "kind"])
        writer.writerows(trigger_sentences(160, seed=22, labels=LABELS))
    return {"target": target, "training": training, "held": held, "variants": variants, "base": base,
            "unvalidated": [str(i) for i in unvalidated]}


def test_variants_join_training_only_when_asked_and_never_of_held_out_seeds(desk, suite_round):
    training_ids = {v for s in suite_round["training"] for v in suite_round["variants"][str(s.id)]}
    held_ids = {v for s in suite_round["held"] for v in suite_round["variants"][str(s.id)]}
    plain = training_set(desk, HATE, [1])
    every_variant = training_ids | held_ids | set(suite_round["unvalidated"])
    assert not every_variant & {e.id for e in plain.train + plain.held_out}  # nobody's writing: never a round example
    assert plain.variants == [] and plain.summary()["variants"] is False
    assert plain.excluded["variant_not_asked"] == len(every_variant)
    assert {str(s.id) for s in suite_round["training"]} <= set(plain.ids("train"))
    assert {str(s.id) for s in suite_round["held"]} <= set(plain.ids("held_out"))

    amplified = training_set(desk, HATE, [1], variants=True)
    assert set(amplified.ids("variants")) == training_ids  # validated, training side; not the unvalidated one
    assert amplified.ids("train") == plain.ids("train") and amplified.ids("held_out") == plain.ids("held_out")
    assert amplified.variants_left_out == {"seed_held_out": len(held_ids)}
    assert {amplified.variant_origins[i]["seed_id"] for i in training_ids} == {str(s.id) for s in suite_round["training"]}
    assert amplified.summary()["variants"] == {"taken": len(training_ids), "seeds": 4,
                                               "left_out": {"seed_held_out": len(held_ids)}}
    assert parse_variant_weight("") == DEFAULT_VARIANT_WEIGHT == 1.0 and parse_variant_weight("0.5") == 0.5
    for bad in ("0", "-1", "heavy", "1000"):
        with pytest.raises(DynadeskError, match="--variants"):
            parse_variant_weight(bad)


def test_train_with_variants_lists_them_in_the_manifest_and_reproduces(desk, suite_round, data_dir, tmp_path,
                                                                       tiny_base_dir, capsys):
    training_ids = {v for s in suite_round["training"] for v in suite_round["variants"][str(s.id)]}
    out = tmp_path / "amplified"
    code, output = run(capsys, data_dir, "train", "--task", HATE, "--rounds", "1", "--variants", "0.5",
                       "--base", suite_round["base"], "--text-column", "sentence", "--label-column", "kind",
                       "--encoder", tiny_base_dir, "--out", out, *TINY)
    assert code == 0, output
    assert f"Validated variants: {len(training_ids)} of 4 seeds trained on, each weighing 0.5 round example" in output
    assert "left out: seed held out 4" in output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    listed = manifest["variants"]
    assert {v["id"] for v in listed["taken"]} == training_ids == set(manifest["data"]["splits"]["variants"])
    assert {v["seed_id"] for v in listed["taken"]} == {str(s.id) for s in suite_round["training"]}
    assert all(v["family"] == "derogation" and v["rule"] == "hedging" for v in listed["taken"])
    assert listed["weight"] == 0.5 and listed["sample_weight"] == pytest.approx(0.5 * manifest["weighting"]["value"])
    held_variants = {v for s in suite_round["held"] for v in suite_round["variants"][str(s.id)]}
    splits = manifest["data"]["splits"]
    trained = set(splits["train"]) | set(splits["variants"]) | set(splits["base_train"])
    assert not held_variants & trained and not held_variants & set(manifest["data"]["hashes"])
    assert training_ids <= set(manifest["data"]["hashes"])
    assert manifest["options"]["variants"] == 0.5
    description = json.loads((out / "dynadesk_model.json").read_text(encoding="utf-8"))
    assert description["training"]["rounds"]["rows"]["variants"] == len(training_ids)
    # promoted, its record says it trained on variants: comparisons then score held-out seeds' variants only
    from app.core.next_round.suite_split import record_trained_on_variants

    record = register_model(desk, out / manifest["output"]["model"], task_code=HATE, name="amplified")
    assert record_trained_on_variants(record) and not record_trained_on_variants(suite_round["target"])

    again = tmp_path / "again"
    code, output = run(capsys, data_dir, "train", "--manifest", out / "manifest.json", "--out", again)
    assert code == 0, output
    assert "Reproduced bit for bit" in output
    first, second = (load_file(folder / "trained_part.safetensors") for folder in (out, again))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)

    # the flag alone weighs a variant as a round example; --variants needs the desk form
    code, output = run(capsys, data_dir, "train", "--data", suite_round["base"], "--text-column", "sentence",
                       "--label-column", "kind", "--variants", "--out", tmp_path / "csv")
    assert code != 0 and "--variants goes with --task" in output


def test_a_variant_weighs_its_own_weight_in_the_loss_and_is_trained_on_only():
    from local_models.train import TrainingConfig
    from local_models.train_rounds import RoundHooks, RoundRows, combined

    rows = RoundRows(["hate", "not hate"], ["b0", "b1", "b2", "b3"] * 5, [0, 1, 1, 0] * 5, ["r0", "r1"], [0, 1],
                     ["h0"], [1], [1], {}, None, ["v0", "v1", "v2"], [0, 0, 1])
    hooks = RoundHooks(rows, 4.0, None, {}, variant_weight=2.0)
    assert combined(rows).texts[20:] == ["r0", "r1", "v0", "v1", "v2", "h0"]
    train, dev, test = hooks.split(combined(rows), TrainingConfig(seed=3))
    assert {22, 23, 24} <= set(train) and not {22, 23, 24} & (set(dev) | set(test))
    logits = torch.zeros(3, 2)
    targets = torch.tensor([0, 0, 0])
    ones = torch.ones(2)
    # equal per-example losses: the batch's loss is the same whatever the weights; the weights show in the gradient
    logits.requires_grad_(True)
    hooks.loss(logits, targets, [0, 20, 22], ones).backward()
    grads = logits.grad[:, 0].abs()
    assert grads[1] / grads[0] == pytest.approx(4.0) and grads[2] / grads[0] == pytest.approx(2.0)
    # without base data a tenth of the written round examples is the dev set; variants stay training rows
    no_base = RoundRows(["hate", "not hate"], [], [], [f"r{i}" for i in range(20)], [i % 2 for i in range(20)],
                        ["h0"], [1], [1], {}, None, ["v0", "v1"], [0, 1])
    hooks = RoundHooks(no_base, 1.0, None, {}, variant_weight=1.0)
    train, dev, _test = hooks.split(combined(no_base), TrainingConfig(seed=3))
    assert {20, 21} <= set(train) and not {20, 21} & set(dev) and len(dev) == 2
