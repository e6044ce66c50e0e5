"""Inter-annotator agreement on nominal verdicts: Cohen's κ per pair of validators, Fleiss' κ and
Krippendorff's α overall. Pure numpy, linear in the number of ratings.

Ratings come as three parallel integer arrays: the item (example) each rating is about, the
rater (validator) who gave it, and its category (a code for the verdict key: 'correct',
'incorrect → label', 'flagged'). Nothing here knows about the database.

Handling of missing ratings (DESIGN: most examples get 0 to 3 verdicts, from different people):
- Cohen's κ for a pair uses the items both rated; pairs with fewer than ``min_overlap`` such
  items are left out, as κ on a handful of items says little.
- Fleiss' κ uses every item with at least two ratings, in Fleiss' (1971) formulation with the
  number of raters allowed to vary per item: the observed agreement of an item is
  Σ_j n_ij(n_ij − 1) / (n_i(n_i − 1)), averaged over items; the expected agreement comes from
  the pooled category shares. With equal rater counts this is exactly the textbook statistic.
- Krippendorff's α (nominal) uses every item with at least two ratings (pairable values),
  which is how α is defined for missing data.
A statistic whose expected agreement is perfect (every rating in one category) is undefined
and returned as None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_OVERLAP = 10


@dataclass(frozen=True)
class PairKappa:
    rater_a: int
    rater_b: int
    items: int  # items both rated
    observed: float  # share of those items on which they agree
    kappa: float | None


@dataclass(frozen=True)
class Agreement:
    pairs: list[PairKappa]
    fleiss_kappa: float | None
    fleiss_items: int
    krippendorff_alpha: float | None
    alpha_items: int  # items with pairable values
    ratings: int


def _dedupe(items: np.ndarray, raters: np.ndarray, categories: np.ndarray):
    """One rating per (item, rater): the last one given wins (a rater cannot rate twice anyway)."""
    if len(items) == 0:
        return items, raters, categories
    key = items.astype(np.int64) * (int(raters.max()) + 1) + raters
    _, last = np.unique(key[::-1], return_index=True)
    keep = np.sort(len(key) - 1 - last)
    return items[keep], raters[keep], categories[keep]


def _pairs_within_items(items: np.ndarray, raters: np.ndarray, categories: np.ndarray):
    """Every unordered pair of ratings of the same item, as (rater, rater, category, category)
    with the lower rater first; plus each pair's item."""
    order = np.lexsort((raters, items))
    it, ra, ca = items[order], raters[order], categories[order]
    firsts, seconds = [], []
    offset = 1
    while offset < len(it):
        same = it[offset:] == it[:-offset]
        if not same.any():
            break
        index = np.nonzero(same)[0]
        firsts.append(index)
        seconds.append(index + offset)
        offset += 1
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, empty
    i, j = np.concatenate(firsts), np.concatenate(seconds)
    return ra[i], ra[j], ca[i], ca[j], it[i]


def cohen_kappas(items, raters, categories, *, min_overlap: int = MIN_OVERLAP) -> list[PairKappa]:
    """Cohen's κ for each pair of raters with at least ``min_overlap`` items in common."""
    items, raters, categories = (np.asarray(a, dtype=np.int64) for a in (items, raters, categories))
    items, raters, categories = _dedupe(items, raters, categories)
    ra, rb, ca, cb, _ = _pairs_within_items(items, raters, categories)
    if len(ra) == 0:
        return []
    n_raters = int(raters.max()) + 1
    n_cats = int(categories.max()) + 1
    pair = ra * n_raters + rb
    pair_ids, pair_index, pair_counts = np.unique(pair, return_inverse=True, return_counts=True)
    wanted = pair_counts >= min_overlap
    if not wanted.any():
        return []
    n_pairs = len(pair_ids)
    # Marginals of each rater within each pair, and the diagonal of each pair's contingency table.
    margin_a = np.bincount(pair_index * n_cats + ca, minlength=n_pairs * n_cats).reshape(n_pairs, n_cats)
    margin_b = np.bincount(pair_index * n_cats + cb, minlength=n_pairs * n_cats).reshape(n_pairs, n_cats)
    agree = np.bincount(pair_index, weights=(ca == cb).astype(float), minlength=n_pairs)
    n = pair_counts.astype(float)
    observed = agree / n
    expected = (margin_a * margin_b).sum(axis=1) / (n * n)
    result = []
    for k in np.nonzero(wanted)[0]:
        kappa = None if np.isclose(expected[k], 1.0) else float((observed[k] - expected[k]) / (1 - expected[k]))
        result.append(PairKappa(int(pair_ids[k] // n_raters), int(pair_ids[k] % n_raters), int(pair_counts[k]),
                                float(observed[k]), kappa))
    return result


def fleiss_kappa(items, raters, categories) -> tuple[float | None, int]:
    """Fleiss' κ over items with two or more ratings (rater counts may vary); and that item count."""
    items, raters, categories = (np.asarray(a, dtype=np.int64) for a in (items, raters, categories))
    items, raters, categories = _dedupe(items, raters, categories)
    if len(items) == 0:
        return None, 0
    _, item_index = np.unique(items, return_inverse=True)
    n_items, n_cats = int(item_index.max()) + 1, int(categories.max()) + 1
    counts = np.bincount(item_index * n_cats + categories, minlength=n_items * n_cats).reshape(n_items, n_cats)
    per_item = counts.sum(axis=1)
    keep = per_item >= 2
    counts, per_item = counts[keep], per_item[keep].astype(float)
    if len(counts) == 0:
        return None, 0
    observed = ((counts * (counts - 1)).sum(axis=1) / (per_item * (per_item - 1))).mean()
    shares = counts.sum(axis=0) / per_item.sum()
    expected = float((shares ** 2).sum())
    if np.isclose(expected, 1.0):
        return None, len(counts)
    return float((observed - expected) / (1 - expected)), len(counts)


def krippendorff_alpha(items, raters, categories) -> tuple[float | None, int]:
    """Krippendorff's α for nominal data with missing values; and the number of pairable items."""
    items, raters, categories = (np.asarray(a, dtype=np.int64) for a in (items, raters, categories))
    items, raters, categories = _dedupe(items, raters, categories)
    if len(items) == 0:
        return None, 0
    _, item_index, per_item = np.unique(items, return_inverse=True, return_counts=True)
    pairable = per_item[item_index] >= 2
    item_index, categories = item_index[pairable], categories[pairable]
    if len(categories) == 0:
        return None, 0
    m = per_item[item_index].astype(float)  # the number of values in each rating's item
    n_cats = int(categories.max()) + 1
    # Coincidences: within an item with m values, each ordered pair of distinct values counts
    # 1/(m − 1). A value of category c coincides with (count of c in the item − 1) others of c.
    n_items = int(item_index.max()) + 1
    item_cat = np.bincount(item_index * n_cats + categories, minlength=n_items * n_cats).reshape(n_items, n_cats)
    same = (item_cat[item_index, categories] - 1) / (m - 1)
    n_c = np.bincount(categories, minlength=n_cats).astype(float)
    n_total = n_c.sum()
    observed_disagreement = n_total - same.sum()  # Σ_{c≠k} o_ck
    expected_pairs = n_total ** 2 - (n_c ** 2).sum()  # Σ_{c≠k} n_c n_k
    if expected_pairs == 0:
        return None, int((per_item >= 2).sum())
    alpha = 1 - (n_total - 1) * observed_disagreement / expected_pairs
    return float(alpha), int((per_item >= 2).sum())


def agreement(items, raters, categories, *, min_overlap: int = MIN_OVERLAP) -> Agreement:
    fleiss, fleiss_items = fleiss_kappa(items, raters, categories)
    alpha, alpha_items = krippendorff_alpha(items, raters, categories)
    return Agreement(cohen_kappas(items, raters, categories, min_overlap=min_overlap), fleiss, fleiss_items,
                     alpha, alpha_items, len(np.asarray(items)))
