"""`dynadesk quality`, in-process: the clusters, the artifact table and the diversity figures as text
and as JSON, on examples whose figures are worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from app.cli import main
from tests.conftest import hate_content, hate_output


def run(capsys, data_dir, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(data_dir), *args])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture
def collected(desk, people, target_model):
    # "not": 6 examples, all hate; 12 examples, half hate: z = 0.5 / sqrt(0.25 / 6) = sqrt(6) = 2.45
    texts = [(f"they are not welcome {w}", "hate") for w in ("here", "there", "now", "today", "anywhere", "ever")]
    texts += [(f"{w} people are lovely", "not hate") for w in ("old", "new", "small", "tall", "quiet", "busy")]
    for text, label in texts:
        desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                             [hate_output(target_model, "not hate")])
    desk.close()


def test_quality_prints_clusters_artifacts_and_diversity(capsys, data_dir, collected):
    code, out, err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--no-embeddings")
    assert code == 0, err
    assert "Near-duplicate clusters: 2" in out  # the two templates, six members each
    line = next(line for line in out.splitlines() if line.startswith("not "))
    assert line.split()[:7] == ["not", "hate", "6", "6", "100.0%", "50.0%", "2.4"]  # sqrt(6) = 2.449
    assert "Round 1: artifacts (12 examples" in out
    assert "1      12" in out  # the diversity row of round 1


def test_quality_json_by_annotator(capsys, data_dir, collected):
    code, out, _err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--json", "--by", "annotator",
                          "--no-embeddings")
    assert code == 0
    document = json.loads(out)
    (round_1,) = document["rounds"]
    row = next(r for r in round_1["artifacts"]["rows"] if r["term"] == "not")
    assert (row["count"], row["with_label"], row["label"], row["share"]) == (6, 6, "hate", 1.0)
    assert row["z"] == pytest.approx(math.sqrt(6))
    assert set(round_1["annotators"]) == {"Ana Author"}
    # words: 4 x 6 + 4 x 6 = 48; distinct: they, are, not, welcome, 6 endings, people, lovely, 6 adjectives = 16
    assert round_1["distinct_1"] == pytest.approx(16 / 48)
    assert sorted(c["size"] for c in document["clusters"]) == [6, 6]


def test_quality_refuses_an_unknown_round(capsys, data_dir, collected):
    code, _out, err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--round", "7", "--no-embeddings")
    assert code == 1 and "hate_speech has no round 7; its rounds are 1" in err


def test_quality_of_a_task_without_examples(capsys, data_dir, desk):
    desk.close()
    code, out, _err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--no-embeddings")
    assert code == 0 and "hate_speech has no submitted examples yet" in out
    code, out, _err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--json", "--no-embeddings")
    document = json.loads(out)
    assert document["clusters"] == [] and document["rounds"][0]["examples"] == 0


def test_novel_share_of_a_later_round_by_hand(capsys, data_dir, desk, people, target_model):
    # round 1: two texts; round 2: a copy of one of them (not novel) and three new texts: 3 of 4 novel
    desk.tasks.get_or_create_round("hate_speech", 2)
    for number, texts in ((1, ["they are not welcome here at all", "what a lovely quiet morning in the park"]),
                          (2, ["They are NOT welcome here at all!", "the river floods every spring",
                               "my neighbour fixed the old bicycle", "tickets for the concert sold out fast"])):
        for text in texts:
            desk.examples.create(people.author.id, "hate_speech", hate_content(text, "not hate"),
                                 [hate_output(target_model, "not hate")], round_number=number)
    desk.close()
    code, out, _err = run(capsys, data_dir, "quality", "--task", "hate_speech", "--json", "--no-embeddings")
    assert code == 0
    shares = {r["round"]: r["novel_share"] for r in json.loads(out)["rounds"]}
    assert shares == {1: None, 2: 0.75}  # round 1 has no earlier round to be novel against
