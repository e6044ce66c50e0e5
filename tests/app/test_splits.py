"""The held-out split of a round: stable, about a tenth, and never splitting a perturbation pair."""

import uuid

from app.core.tasks.splits import HELD_OUT_SHARE, is_held_out


def test_about_a_tenth_is_held_out_and_the_choice_is_stable():
    ids = [uuid.UUID(int=n * 7919 + 11) for n in range(20_000)]
    held = [is_held_out(i) for i in ids]
    assert abs(sum(held) / len(ids) - HELD_OUT_SHARE) < 0.01
    assert held == [is_held_out(i) for i in ids]


def test_a_perturbation_falls_where_its_original_falls():
    originals = [uuid.UUID(int=n) for n in range(2_000)]
    for original in originals:
        assert is_held_out(uuid.uuid4(), perturbation_of=original) == is_held_out(original)
