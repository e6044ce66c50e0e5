"""Desks, candidates and the command line for the proposal tests: small real models (the hate-trigger
fixture), a better candidate and a worse one made from it, and desks configured for a server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.core.desk import Desk
from tests.model_fixtures import LABELS
from tests.sync.helpers import Account, prepare_desk

TASK = "hate_speech"


def part_of(hate_trigger_model_dir: Path) -> Path:
    return hate_trigger_model_dir.parent.parent / "parts" / "hate-trigger"


def candidate(hate_trigger_model_dir: Path, folder: Path, *, inverted: bool = False, nudge: float = 0.0,
              rounds: list[int] | None = None) -> Path:
    """A private copy of the trained part `dynadesk train` writes, with a manifest. ``inverted``: its labels
    swapped (a real, much worse model); ``nudge``: its trained weights moved a little (another candidate
    as good as the first)."""
    shutil.copytree(part_of(hate_trigger_model_dir), folder)
    description_path = folder / "dynadesk_model.json"
    description = json.loads(description_path.read_text(encoding="utf-8"))
    if inverted:
        description["id2label"] = {"0": description["id2label"]["1"], "1": description["id2label"]["0"]}
        description["name"] = "hate-trigger, labels swapped"
    description_path.write_text(json.dumps(description), encoding="utf-8")
    if nudge:
        from safetensors.torch import load_file, save_file

        weights = folder / "trained_part.safetensors"
        tensors = load_file(str(weights))
        first = sorted(tensors)[0]
        tensors[first] = tensors[first] + nudge
        save_file(tensors, str(weights))
    manifest = {"format": "dynadesk-training-manifest", "task": TASK, "rounds": rounds or [1, 2], "seed": 3}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def inverted_model(hate_trigger_model_dir: Path, folder: Path) -> Path:
    """The assembled hate-trigger model with its labels swapped: a loadable target that is mostly wrong."""
    shutil.copytree(hate_trigger_model_dir, folder)
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["id2label"] = {"0": config["id2label"]["1"], "1": config["id2label"]["0"]}
    config["label2id"] = {name: int(i) for i, name in config["id2label"].items()}
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return folder


def base_test_csv(folder: Path) -> Path:
    """Base data whose seeded test split (a tenth) has the 97 rows the promotion rule needs to judge a split."""
    import csv

    from tests.model_fixtures import trigger_sentences

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "base.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "kind"])
        writer.writerows(trigger_sentences(1000, seed=5, labels=LABELS))
    return path


def team_desk(path: Path, account: Account, url: str) -> Desk:
    """A desk with ``account``'s profile, set up for the server at ``url`` as `dynadesk sync configure` does."""
    from sync.tokens import TokenStore

    desk = prepare_desk(path, account)
    desk.settings.server_url = url
    desk.save_settings()
    TokenStore(desk.root).set(url, account.token)
    return desk


def cli(capsys, data_dir: Path, *args) -> tuple[int, str, str]:
    """The command in-process, as a person types it: (exit status, stdout, stderr)."""
    from app.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["--data-dir", str(data_dir), *[str(a) for a in args]])
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def rounds_state(desk: Desk) -> list[tuple]:
    return [(r.number, r.status, r.revision, [m.sha256 for m in desk.models.round_models(r.id)])
            for r in desk.tasks.rounds(TASK)]


def decided_examples(desk: Desk, model, held_out: int, seed: int = 7) -> int:
    """Examples in the open round, written against ``model`` by an annotator of this desk and confirmed by
    the desk's profile as lead, until ``held_out`` of them fall on the held-out side (``is_held_out``: the
    ones a comparison scores). Every other one carries the trigger word and is hate. Returns how many."""
    import random

    from app.core.domain import Role
    from app.core.tasks.splits import is_held_out
    from tests.conftest import hate_content, hate_output
    from tests.model_fixtures import FILLER, TRIGGER

    rng = random.Random(seed)
    author = desk.people.by_name("Ann Author") or desk.people.create("Ann Author", Role.ANNOTATOR)
    judge = desk.current_person()
    held, i = 0, 0
    while held < held_out:
        i += 1
        words = [rng.choice(FILLER) for _ in range(rng.randint(4, 8))] + [f"w{seed}x{i}"]
        label = "hate" if i % 2 == 0 else "not hate"
        if label == "hate":
            words.insert(rng.randrange(len(words)), TRIGGER)
        example = desk.examples.create(author.id, TASK, hate_content(" ".join(words), label),
                                       [hate_output(model, label)])
        desk.validation.validate(example.id, judge.id, "correct", mode="lead")
        held += is_held_out(example.id)
    return i
