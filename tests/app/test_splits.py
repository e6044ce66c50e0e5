"""The held-out split of a round: stable, about a tenth, and never splitting a perturbation pair."""

import uuid

from app.core.tasks.splits import GROUP_KEY, HELD_OUT_SHARE, held_out_example, is_held_out, split_group


def test_about_a_tenth_is_held_out_and_the_choice_is_stable():
    ids = [uuid.UUID(int=n * 7919 + 11) for n in range(20_000)]
    held = [is_held_out(i) for i in ids]
    assert abs(sum(held) / len(ids) - HELD_OUT_SHARE) < 0.01
    assert held == [is_held_out(i) for i in ids]


def test_a_perturbation_falls_where_its_original_falls():
    originals = [uuid.UUID(int=n) for n in range(2_000)]
    for original in originals:
        assert is_held_out(uuid.uuid4(), perturbation_of=original) == is_held_out(original)


def test_ungrouped_examples_keep_the_split_they_had_before_groups():
    """The hash of an ungrouped example is the one the split always used: ids never move between sides."""
    import hashlib

    def before(example_id, perturbation_of=None):  # the definition as first shipped, spelled out
        root = perturbation_of if perturbation_of is not None else example_id
        return int.from_bytes(hashlib.sha256(root.bytes).digest()[:8], "big") % 10_000 < 1_000

    ids = [uuid.UUID(int=n * 104_729 + 3) for n in range(5_000)]
    assert [is_held_out(i) for i in ids] == [before(i) for i in ids]
    assert [is_held_out(i, group=None) for i in ids] == [before(i) for i in ids]
    assert [is_held_out(i, ids[0]) for i in ids[:50]] == [before(i, ids[0]) for i in ids[:50]]


def test_every_member_of_a_group_falls_on_its_groups_side_pairs_included():
    groups = [f"templ_id={n}" for n in range(600)]
    sides = {}
    for group in groups:
        members = [is_held_out(uuid.uuid4(), group=group) for _ in range(5)]
        assert len(set(members)) == 1, group
        sides[group] = members[0]
        # a perturbation takes its original's group, so the pair stays together too
        original_origin = {GROUP_KEY: group}
        assert held_out_example(uuid.uuid4(), uuid.uuid4(), {}, original_origin) == sides[group]
        assert held_out_example(uuid.uuid4(), None, original_origin) == sides[group]
    assert 0.05 < sum(sides.values()) / len(groups) < 0.16  # about a tenth of the groups
    assert split_group({"kind": "import"}) is None and split_group({GROUP_KEY: ""}) is None
