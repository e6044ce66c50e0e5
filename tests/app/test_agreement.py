"""Agreement statistics: hand-computed and published cases, and independent reference
implementations (scikit-learn, statsmodels, krippendorff) on the same random data."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from app.core.services.agreement import agreement, cohen_kappas, fleiss_kappa, krippendorff_alpha


def from_matrix(matrix):
    """(items, raters, categories) from an items × raters matrix with NaN for missing."""
    matrix = np.asarray(matrix, dtype=float)
    items, raters = np.nonzero(~np.isnan(matrix))
    return items, raters, matrix[items, raters].astype(int)


def test_cohen_kappa_by_hand():
    a = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    b = [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    # observed 8/10; both raters 50/50, so expected 0.5; κ = (0.8 − 0.5) / 0.5
    [pair] = cohen_kappas(*from_matrix(np.array([a, b]).T))
    assert (pair.rater_a, pair.rater_b, pair.items) == (0, 1, 10)
    assert pair.observed == pytest.approx(0.8)
    assert pair.kappa == pytest.approx(0.6)


def test_cohen_kappa_needs_enough_overlap_and_is_undefined_without_variation():
    matrix = np.full((12, 3), np.nan)
    matrix[:, 0] = 1
    matrix[:, 1] = 1  # both always say the same single category: expected agreement is 1
    matrix[:5, 2] = 0  # rater 2 overlaps only five items with each
    pairs = cohen_kappas(*from_matrix(matrix), min_overlap=10)
    assert [(p.rater_a, p.rater_b, p.items, p.kappa) for p in pairs] == [(0, 1, 12, None)]
    assert len(cohen_kappas(*from_matrix(matrix), min_overlap=5)) == 3


def test_fleiss_kappa_on_the_published_example():
    # Fleiss (1971) as worked in Wikipedia: 10 items, 14 raters each, 5 categories; κ = 0.210
    counts = np.array([
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ])
    items, raters, categories = [], [], []
    for item, row in enumerate(counts):
        labels = np.repeat(np.arange(5), row)
        items += [item] * len(labels)
        raters += list(range(len(labels)))
        categories += list(labels)
    kappa, used = fleiss_kappa(items, raters, categories)
    assert used == 10
    assert kappa == pytest.approx(0.20993, abs=1e-4)
    assert kappa == pytest.approx(sm_fleiss_kappa(counts, method="fleiss"))


def test_fleiss_kappa_with_varying_rater_counts_by_hand():
    # item 0: two raters agree (P = 1); item 1: three raters 2-1 (P = 2/6); item 2: one rating (left out)
    items, raters, categories = [0, 0, 1, 1, 1, 2], [0, 1, 0, 1, 2, 0], [0, 0, 0, 0, 1, 1]
    kappa, used = fleiss_kappa(items, raters, categories)
    observed = (1 + 2 / 6) / 2
    shares = np.array([4, 1]) / 5
    expected = (shares ** 2).sum()
    assert used == 2
    assert kappa == pytest.approx((observed - expected) / (1 - expected))


def test_krippendorff_alpha_on_the_published_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units,
    # missing values; nominal α = 0.743
    nan = np.nan
    data = np.array([
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ])
    alpha, pairable = krippendorff_alpha(*from_matrix(data.T))
    assert pairable == 11  # the last unit has a single value
    assert alpha == pytest.approx(0.743, abs=5e-4)


def test_undefined_statistics_are_none():
    assert fleiss_kappa([0, 0, 1, 1], [0, 1, 0, 1], [2, 2, 2, 2]) == (None, 2)
    assert krippendorff_alpha([0, 0, 1, 1], [0, 1, 0, 1], [2, 2, 2, 2]) == (None, 2)
    assert fleiss_kappa([0, 1], [0, 0], [1, 1]) == (None, 0)
    empty = agreement([], [], [])
    assert (empty.pairs, empty.fleiss_kappa, empty.krippendorff_alpha, empty.ratings) == ([], None, None, 0)


def random_ratings(seed: int, items: int, raters: int, categories: int, missing: float):
    """Raters who mostly agree with a hidden truth, some of their ratings missing."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, categories, items)
    matrix = np.where(rng.random((items, raters)) < 0.7, truth[:, None], rng.integers(0, categories, (items, raters)))
    matrix = matrix.astype(float)
    matrix[rng.random((items, raters)) < missing] = np.nan
    return matrix


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cohen_kappa_matches_scikit_learn(seed):
    matrix = random_ratings(seed, items=300, raters=5, categories=3, missing=0.4)
    pairs = {(p.rater_a, p.rater_b): p for p in cohen_kappas(*from_matrix(matrix), min_overlap=10)}
    assert len(pairs) == 10
    for a, b in itertools.combinations(range(5), 2):
        both = ~np.isnan(matrix[:, a]) & ~np.isnan(matrix[:, b])
        assert pairs[(a, b)].items == both.sum()
        assert pairs[(a, b)].kappa == pytest.approx(cohen_kappa_score(matrix[both, a], matrix[both, b]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fleiss_kappa_matches_statsmodels(seed):
    matrix = random_ratings(seed, items=200, raters=4, categories=3, missing=0.0)  # statsmodels needs equal counts
    kappa, used = fleiss_kappa(*from_matrix(matrix))
    table, _ = aggregate_raters(matrix.astype(int))
    assert used == 200
    assert kappa == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_krippendorff_alpha_matches_the_krippendorff_package(seed):
    matrix = random_ratings(seed, items=400, raters=6, categories=4, missing=0.6)
    alpha, _ = krippendorff_alpha(*from_matrix(matrix))
    reference = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement="nominal")
    assert alpha == pytest.approx(reference)


def test_rater_and_item_codes_need_not_be_dense_or_sorted():
    matrix = random_ratings(9, items=100, raters=3, categories=3, missing=0.2)
    items, raters, categories = from_matrix(matrix)
    shuffle = np.random.default_rng(0).permutation(len(items))
    sparse = agreement(items[shuffle] * 7 + 3, raters[shuffle] * 5, categories[shuffle] + 2, min_overlap=10)
    dense = agreement(items, raters, categories, min_overlap=10)
    assert sparse.fleiss_kappa == pytest.approx(dense.fleiss_kappa)
    assert sparse.krippendorff_alpha == pytest.approx(dense.krippendorff_alpha)
    assert [p.kappa for p in sparse.pairs] == pytest.approx([p.kappa for p in dense.pairs])
