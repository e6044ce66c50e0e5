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
from typing import NamedTuple

import numpy as np

MIN_OVERLAP = 10


class PairKappa(NamedTuple):
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


def _prepare(items, raters, categories, unique: bool = False, dense: bool = False):
    """Integer arrays, one rating per (item, rater) (the last one given wins, should a rater
    appear twice), and items renumbered 0..k−1."""
    items, raters, categories = (np.asarray(a, dtype=np.int64) for a in (items, raters, categories))
    if len(items) == 0:
        return items, raters, categories, 0
    if dense:  # small non-negative item numbers already (rows of a table): no renumbering needed
        item_index = items
    else:
        _, item_index = np.unique(items, return_inverse=True)
        item_index = item_index.reshape(-1)
    if not unique:
        key = item_index * (int(raters.max()) + 1) + raters
        _, last = np.unique(key[::-1], return_index=True)
        keep = np.sort(len(key) - 1 - last)
        item_index, raters, categories = item_index[keep], raters[keep], categories[keep]
    return item_index, raters, categories, int(item_index.max()) + 1


def _pairs_within_items(items: np.ndarray, raters: np.ndarray, categories: np.ndarray):
    """Every unordered pair of ratings of the same item, as (rater, rater, category, category)
    with the lower rater first."""
    order = np.argsort(items, kind="stable")
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
        return empty, empty, empty, empty
    i, j = np.concatenate(firsts), np.concatenate(seconds)
    swap = ra[i] > ra[j]
    first, second = np.where(swap, j, i), np.where(swap, i, j)
    return ra[first], ra[second], ca[first], ca[second]


def _cohen(items, raters, categories, min_overlap: int) -> list[PairKappa]:
    ra, rb, ca, cb = _pairs_within_items(items, raters, categories)
    if len(ra) == 0:
        return []
    n_raters = int(raters.max()) + 1
    n_cats = int(categories.max()) + 1
    pair = ra * n_raters + rb
    pair_ids, pair_index, pair_counts = np.unique(pair, return_inverse=True, return_counts=True)
    pair_index = pair_index.reshape(-1)
    wanted = np.nonzero(pair_counts >= min_overlap)[0]
    if not len(wanted):
        return []
    n_pairs = len(pair_ids)
    # Marginals of each rater within each pair, and the diagonal of each pair's contingency table.
    margin_a = np.bincount(pair_index * n_cats + ca, minlength=n_pairs * n_cats).reshape(n_pairs, n_cats)
    margin_b = np.bincount(pair_index * n_cats + cb, minlength=n_pairs * n_cats).reshape(n_pairs, n_cats)
    agree = np.bincount(pair_index, weights=(ca == cb).astype(float), minlength=n_pairs)
    n = pair_counts.astype(float)
    observed = agree / n
    expected = (margin_a * margin_b).sum(axis=1) / (n * n)
    undefined = np.abs(1 - expected) < 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (observed - expected) / (1 - expected)
    kappa = np.where(undefined, np.nan, kappa)[wanted]
    return list(map(PairKappa._make, zip(
        (pair_ids[wanted] // n_raters).tolist(), (pair_ids[wanted] % n_raters).tolist(), pair_counts[wanted].tolist(),
        observed[wanted].tolist(), [None if k != k else k for k in kappa.tolist()])))


def _item_category_counts(items, categories, n_items):
    n_cats = int(categories.max()) + 1
    return np.bincount(items * n_cats + categories, minlength=n_items * n_cats).reshape(n_items, n_cats)


def _fleiss(counts) -> tuple[float | None, int]:
    per_item = counts.sum(axis=1)
    keep = per_item >= 2
    counts, per_item = counts[keep], per_item[keep].astype(float)
    if len(counts) == 0:
        return None, 0
    observed = ((counts * (counts - 1)).sum(axis=1) / (per_item * (per_item - 1))).mean()
    shares = counts.sum(axis=0) / per_item.sum()
    expected = float((shares ** 2).sum())
    if abs(1 - expected) < 1e-12:
        return None, len(counts)
    return float((observed - expected) / (1 - expected)), len(counts)


def _krippendorff(counts) -> tuple[float | None, int]:
    # Coincidences: within an item with m values, each ordered pair of distinct values counts
    # 1/(m − 1); so o_cc = Σ_u n_uc(n_uc − 1)/(m_u − 1), and Σ_{c≠k} o_ck = n − Σ_c o_cc.
    per_item = counts.sum(axis=1)
    keep = per_item >= 2
    counts, per_item = counts[keep].astype(float), per_item[keep].astype(float)
    if len(counts) == 0:
        return None, 0
    n_c = counts.sum(axis=0)
    n_total = n_c.sum()
    observed_disagreement = n_total - ((counts * (counts - 1)).sum(axis=1) / (per_item - 1)).sum()
    expected_pairs = n_total ** 2 - (n_c ** 2).sum()  # Σ_{c≠k} n_c n_k
    if expected_pairs == 0:
        return None, len(counts)
    return float(1 - (n_total - 1) * observed_disagreement / expected_pairs), len(counts)


def cohen_kappas(items, raters, categories, *, min_overlap: int = MIN_OVERLAP) -> list[PairKappa]:
    """Cohen's κ for each pair of raters with at least ``min_overlap`` items in common."""
    items, raters, categories, _ = _prepare(items, raters, categories)
    return _cohen(items, raters, categories, min_overlap)


def fleiss_kappa(items, raters, categories) -> tuple[float | None, int]:
    """Fleiss' κ over items with two or more ratings (rater counts may vary); and that item count."""
    items, raters, categories, n_items = _prepare(items, raters, categories)
    if n_items == 0:
        return None, 0
    return _fleiss(_item_category_counts(items, categories, n_items))


def krippendorff_alpha(items, raters, categories) -> tuple[float | None, int]:
    """Krippendorff's α for nominal data with missing values; and the number of pairable items."""
    items, raters, categories, n_items = _prepare(items, raters, categories)
    if n_items == 0:
        return None, 0
    return _krippendorff(_item_category_counts(items, categories, n_items))


def agreement(items, raters, categories, *, min_overlap: int = MIN_OVERLAP, unique: bool = False,
              dense: bool = False) -> Agreement:
    """All three statistics at once. ``unique``: the caller guarantees one rating per (item, rater);
    ``dense``: items are small non-negative integers (such as table rows)."""
    items, raters, categories, n_items = _prepare(items, raters, categories, unique, dense)
    if n_items == 0:
        return Agreement([], None, 0, None, 0, 0)
    counts = _item_category_counts(items, categories, n_items)
    fleiss, fleiss_items = _fleiss(counts)
    alpha, alpha_items = _krippendorff(counts)
    return Agreement(_cohen(items, raters, categories, min_overlap), fleiss, fleiss_items, alpha, alpha_items,
                     len(items))
