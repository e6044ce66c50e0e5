"""The artifact statistic, the conditional label share, distinct-n and the embedding spread, each
against small cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core.quality.artifacts import (
    TermMatrix,
    artifact_table,
    artifact_tables,
    critical_z,
    mark_recurring,
    words_of,
)
from app.core.quality.diversity import distinct_n, embedding_spread, sample_indexes

NEGATION = [("not ok", "A"), ("not fine", "A"), ("not good", "A"), ("ok fine", "B"), ("good day", "B"),
            ("nice day", "B")]


def table_of(pairs, **options):
    matrix = TermMatrix.build([text for text, _ in pairs])
    return matrix, artifact_table(matrix, [label for _, label in pairs], **options)


def test_words_are_casefolded_with_edge_punctuation_off_and_obfuscation_kept():
    assert words_of("Women. are NOT “great”!! sh!t (really)") == ["women", "are", "not", "great", "sh!t", "really"]
    assert words_of("!!! ...") == []


def test_a_term_always_with_one_label_scores_by_its_evidence():
    _matrix, table = table_of(NEGATION, min_count=2)
    # base rate of A: 3/6. "not": 3 examples, all A: z = (1 - 0.5) / sqrt(0.25 / 3) = sqrt(3).
    # "day": 2 examples, both B: z = sqrt(2). ok, fine, good: one of each label, z = 0, not listed.
    assert [(r.term, r.label, r.count, r.with_label) for r in table.rows] == [("not", "A", 3, 3), ("day", "B", 2, 2)]
    assert table.rows[0].share == 1.0 and table.rows[0].base_rate == 0.5
    assert table.rows[0].z == pytest.approx(math.sqrt(3)) and table.rows[1].z == pytest.approx(math.sqrt(2))
    # tested: five terms seen twice or more (bigrams are seen once) x two labels
    assert table.tested == 10 and table.critical_z == pytest.approx(3.0902, abs=1e-4)  # Φ⁻¹(1 - 0.01/10)
    assert not any(r.significant for r in table.rows)
    assert table.base_rates == {"A": 0.5, "B": 0.5} and table.examples == 6


def test_the_conditional_share_and_z_against_an_uneven_base_rate():
    _matrix, table = table_of(NEGATION + [("not bad", "B")], min_count=2)
    row = table.row("not")
    # 4 examples with "not", 3 of them A; A is 3/7 of all.
    assert (row.count, row.with_label, row.label) == (4, 3, "A")
    assert row.share == 0.75 and row.base_rate == pytest.approx(3 / 7)
    assert row.z == pytest.approx((0.75 - 3 / 7) / math.sqrt((3 / 7) * (4 / 7) / 4))  # 1.2990
    assert row.z == pytest.approx(1.2990, abs=1e-4)


def test_min_count_bigrams_mask_and_significance():
    pairs = [("they are not welcome", "hate")] * 30 + [("they are welcome", "not hate")] * 30
    matrix, table = table_of(pairs, min_count=5)
    # 'not', 'are not' and 'not welcome' each: 30 examples, all hate; base 0.5: z = 0.5 / sqrt(0.25/30) = sqrt(30)
    top = {r.term: r for r in table.rows if r.label == "hate"}
    assert set(top) == {"not", "are not", "not welcome"}
    assert all(r.z == pytest.approx(math.sqrt(30)) and r.significant for r in top.values())
    assert table.rows[0].z >= table.rows[-1].z
    assert table_of(pairs, min_count=31)[1].rows == ()  # nothing seen often enough to test
    # the same figures on a subset: the first 30 examples alone all carry one label: nothing to give away
    only_hate = np.arange(60) < 30
    assert artifact_table(matrix, [label for _, label in pairs], mask=only_hate).rows == ()
    assert list(matrix.examples_with("ARE NOT")) == list(range(30))
    assert len(matrix.examples_with("absent")) == 0 and len(matrix.examples_with("")) == 0


def test_tokens_listed_in_several_rounds_are_marked():
    _m, first = table_of(NEGATION, min_count=2)
    _m, second = table_of([("not ok", "A"), ("not now", "A"), ("yes", "B"), ("fine", "B")], min_count=2)
    marked = mark_recurring({1: first, 2: second})
    assert marked[1].row("not").rounds == (1, 2) and marked[1].row("not").recurring
    assert marked[2].row("not").rounds == (1, 2)
    assert marked[1].row("day").rounds == (1,) and not marked[1].row("day").recurring


def test_critical_z_with_nothing_tested_is_infinite():
    assert critical_z(0) == math.inf
    assert critical_z(1, alpha=0.05) == pytest.approx(1.6449, abs=1e-4)


def test_distinct_n_by_hand():
    matrix = TermMatrix.build(["a b a", "A b c.", "d"])
    # words: a b a | a b c: distinct-1 = 3/6; bigrams a-b, b-a, a-b, b-c (none across examples): 3/4
    figures = distinct_n(matrix, np.array([0, 1]))
    assert (figures.distinct_1, figures.distinct_2, figures.sample) == (0.5, 0.75, 2)
    alone = distinct_n(matrix, np.array([2]))
    assert alone.distinct_1 == 1.0 and alone.distinct_2 is None


def test_embedding_spread_by_hand():
    # cos: (1,0)-(0,1) 0; (1,0)-(1,1) and (0,1)-(1,1) 1/√2: mean cos = √2/3; spread = 1 - √2/3
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])  # the zero vector is left out
    assert embedding_spread(vectors) == pytest.approx(1 - math.sqrt(2) / 3)
    assert embedding_spread(np.array([[3.0, 4.0], [6.0, 8.0]])) == pytest.approx(0.0)
    assert embedding_spread(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(2.0)
    assert embedding_spread(np.array([[1.0, 2.0]])) is None
    with pytest.raises(ValueError, match="matrix"):
        embedding_spread(np.array([1.0, 2.0]))


def test_samples_are_seeded_and_bounded():
    candidates = np.arange(100, 200)
    first, again = sample_indexes(candidates, 10), sample_indexes(candidates, 10)
    assert list(first) == list(again) and len(first) == 10 and set(first) <= set(candidates)
    assert list(sample_indexes(np.array([5, 3]), 10)) == [3, 5]


def test_tables_of_groups_from_one_count_equal_the_tables_one_by_one():
    pairs = NEGATION + [("not bad", "B"), ("not ok at all", "A"), ("nice day", "A"), ("good day", "B")] * 3
    matrix = TermMatrix.build([text for text, _ in pairs])
    labels = [label for _, label in pairs]
    groups = np.array([i % 3 - 1 for i in range(len(pairs))])  # -1 (in no group), 0 and 1
    together = artifact_tables(matrix, labels, groups, 2, min_count=2)
    for group, table in enumerate(together):
        assert table == artifact_table(matrix, labels, mask=groups == group, min_count=2)
    assert together[0].rows and together[0] != together[1]
