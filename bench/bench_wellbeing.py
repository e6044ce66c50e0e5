"""Analyst wellbeing (issue 22): what the blur costs a reading view. Masking runs on the database
worker when an example is fetched (and on the GUI thread only when the model's words arrive), so
it should stay far below a frame for a tweet and within a few frames for the longest text a task allows.
"""

from __future__ import annotations

import csv
import html
from pathlib import Path

from app.core.wellbeing.blur import mask_spans
from app.core.wellbeing.word_list import bundled_words
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
    return [
        summarise(GROUP, "blur: mask one tweet (bundled word list)", time_calls(one_tweet, len(tweets)),
                  notes=f"{len(tweets)} Davidson tweets, {len(words)} list entries"),
        summarise(GROUP, "blur: mask a 5,000-character text", time_calls(lambda: mask_spans(longest, words), 30),
                  notes=f"{len(longest)} characters with leetspeak, spaced letters and emoji"),
    ]
