"""Analyst wellbeing: what the blur costs a reading view. Masking runs on the database
worker when an example is fetched (and on the GUI thread only when the model's words arrive), so
it should stay far below a frame for a tweet and within a few frames for the longest text a task allows.
"""

from __future__ import annotations

import csv
import html
import random
import string
from pathlib import Path

from app.core.wellbeing.blur import mask_spans
from app.core.wellbeing.word_list import bundled_words, clean_words
from bench.common import BenchContext, Result, summarise, time_calls

GROUP = "wellbeing"
_DAVIDSON = [Path(__file__).resolve().parents[2] / "shared" / "data" / "davidson2017" / "labeled_data.csv",
             Path("/work/shared/data/davidson2017/labeled_data.csv")]
# disguises the matcher sees through: leetspeak, spaced letters, emoji beside a word
_WRITTEN = "Honestly those people are v3rm1n and p a r a s i t e s, the lot of them 🙄"


def _tweets(n: int) -> list[str]:
    for path in _DAVIDSON:
        if path.exists():
            with path.open(encoding="utf-8", newline="") as handle:
                return [html.unescape(row["tweet"]) for _, row in zip(range(n), csv.DictReader(handle))]
    return [_WRITTEN] * n


def run(ctx: BenchContext) -> list[Result]:
    words = bundled_words("hate_speech")
    tweets = _tweets(200 if ctx.quick else 2000)
    position = iter(range(10**9))

    def one_tweet() -> None:
        mask_spans(tweets[next(position) % len(tweets)], words)

    longest = (_WRITTEN + " ") * 70  # about 5,000 characters, a task's longest text
    # a lead's full list: 2,000 added words (every fifth one a word start), beside the bundled ones
    rng = random.Random(7)
    many = words + tuple("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 12)))
                         + ("*" if i % 5 == 0 else "") for i in range(2000))
    mask_spans(longest, many)  # the list is compiled once per set of words, as on a desk
    return [
        summarise(GROUP, "blur: mask one tweet (bundled word list)", time_calls(one_tweet, len(tweets)),
                  notes=f"{len(tweets)} Davidson tweets, {len(words)} list entries"),
        summarise(GROUP, "blur: mask a 5,000-character text", time_calls(lambda: mask_spans(longest, words), 30),
                  notes=f"{len(longest)} characters with leetspeak, spaced letters and emoji"),
        summarise(GROUP, "blur: mask a 5,000-character text, 2,000 lead words", time_calls(
            lambda: mask_spans(longest, many), 30), budget_p95_ms=50,
                  notes=f"{len(many)} entries, compiled once (a regex alternation took 14-16 s)"),
        summarise(GROUP, "blur: check a lead's 2,000 words (desk and server, one rule)",
                  time_calls(lambda: clean_words(many[len(words):]), 10),
                  notes="what the server runs on a pushed task setting before storing it"),
    ]
