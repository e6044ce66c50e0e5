"""The one definition of "near": normalisation and similarity against hand-computed cases."""

import pytest

from app.core.quality import (
    DEFAULT_NEAR_THRESHOLD,
    NGRAM_SIZE,
    Fingerprint,
    is_near,
    jaccard,
    normalise,
    shingles,
    similarity,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("I hate women.", "ihatewomen"),
        ("I  HATE\twomen!!!", "ihatewomen"),  # case, whitespace and punctuation fold
        ("Ｉ ｈａｔｅ ｗｏｍｅｎ", "ihatewomen"),  # full-width letters (NFKC)
        ("𝐈 𝐡𝐚𝐭𝐞 𝐰𝐨𝐦𝐞𝐧", "ihatewomen"),  # mathematical bold (NFKC)
        ("I h\u200bate wo\u200dmen\ufeff", "ihatewomen"),  # zero-width space/joiner, BOM
        ("I h4te w0men", "ihatewomen"),  # leetspeak inside words
        ("$hit b!tch @ss", "shitbitchass"),
        ("I h a t e women", "ihatewomen"),  # spaced-out letters
        ("Ihate women", "ihatewomen"),  # a dropped space
        ("sooooo goooood", "soogood"),  # runs of one character squeeze to two
        ("café naïve", "cafenaive"),  # accents
        ("2024 was 3 years", "2024was3years"),  # numbers alone are not leetspeak
        ("I hate 🐍\ufe0f🏽", "ihate🐍"),  # emoji kept; variation selector and skin tone dropped
        ("\u202bשָׁלוֹם עוֹלָם\u202c", "שלוםעולם"),  # RTL: bidi embedding and niqqud dropped
        ("مَرْحَبًا", "مرحبا"),  # Arabic harakat
        ("مـــرحبا", "مرحبا"),  # Arabic tatweel (kashida)
        ("ﻣﺮﺣﺒﺎ", "مرحبا"),  # Arabic presentation forms (NFKC)
        ("\u200fمرحبا\u200e", "مرحبا"),  # right-to-left / left-to-right marks
        ("???", "???"),  # punctuation only keeps its punctuation
        ("", ""),
    ],
)
def test_normalise_folds_what_a_reader_would_not_notice(raw, expected):
    assert normalise(raw) == expected


def test_punctuation_only_texts_stay_apart():
    assert similarity("???", "!!!") == 0.0
    assert similarity("?!?", "?!?") == 1.0


def test_shingles_are_character_ngrams_of_the_normalised_form():
    assert NGRAM_SIZE == 4
    assert shingles("abcdef") == {"abcd", "bcde", "cdef"}
    assert shingles("abc") == {"abc"}  # shorter than n: the whole text
    assert shingles("") == frozenset()


def test_jaccard_by_hand():
    # {abcd, bcde, cdef} vs {abcd, bcdx, cdxy}: 1 shared of 5 distinct
    assert jaccard(shingles("abcdef"), shingles("abcdxy")) == pytest.approx(1 / 5)
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0


def test_similarity_by_hand():
    # "ihate🐍" -> ihat, hate, ate🐍 ; "ihate🌻" -> ihat, hate, ate🌻 : 2 shared of 4 distinct
    assert similarity("I hate 🐍", "I hate 🌻") == pytest.approx(2 / 4)
    # different emoji only: not the same text
    assert similarity("I hate 🐍", "I hate 🌻") < 1.0
    # equal after normalisation: 1.0 even though the raw texts differ everywhere
    assert similarity("I h4te w0men!!", "i HATE women") == 1.0
    assert similarity("\u202bשלום\u202c", "שָׁלוֹם") == 1.0
    # "ihatewomen" (7 grams) vs "ihatemen" (5 grams): ihat, hate shared... and "amen"? no:
    # ihatewomen: ihat hate atew tewo ewom wome omen ; ihatemen: ihat hate atem teme emen
    assert similarity("I hate women", "I hate men") == pytest.approx(2 / 10)


def test_threshold_is_inclusive():
    assert DEFAULT_NEAR_THRESHOLD == 0.5
    assert is_near(0.5)
    assert not is_near(0.4999)
    assert is_near(0.3, threshold=0.3)


def test_fingerprint_matches_similarity():
    first, second = Fingerprint.of("I hate 🐍"), Fingerprint.of("I hate 🌻")
    assert first.similarity(second) == similarity("I hate 🐍", "I hate 🌻")
    assert Fingerprint.of("H4TE").similarity(Fingerprint.of("hate")) == 1.0


def test_on_real_data_hatecheck_templates_cluster_and_unrelated_tweets_do_not():
    """The evidence behind NGRAM_SIZE and DEFAULT_NEAR_THRESHOLD, on a fixed sample."""
    import csv
    import random
    from itertools import combinations

    from tests.conftest import shared_file

    with shared_file("hatecheck", "test_suite_cases_dev.csv").open(encoding="utf-8") as handle:
        cases = list(csv.DictReader(handle))
    with shared_file("davidson2017", "labeled_data.csv").open(encoding="utf-8") as handle:
        tweets = [row["tweet"] for row in csv.DictReader(handle)]
    by_template: dict[str, list[str]] = {}
    for case in cases:
        by_template.setdefault(case["templ_id"], []).append(case["test_case"])
    rng = random.Random(3)
    templates = rng.sample(sorted(by_template), 150)
    siblings = [similarity(a, b) for t in templates for a, b in combinations(by_template[t], 2)]
    tweet_pairs = [similarity(*rng.sample(tweets, 2)) for _ in range(3000)]
    near_siblings = sum(is_near(s) for s in siblings) / len(siblings)
    near_tweets = sum(is_near(s) for s in tweet_pairs) / len(tweet_pairs)
    assert near_siblings > 0.7, near_siblings  # measured 0.79 over every template
    assert near_tweets < 0.002, near_tweets
