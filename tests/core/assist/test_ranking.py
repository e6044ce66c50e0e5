"""rank(): the order the writer sees checked suggestions in (pure: no model needed)."""

from __future__ import annotations

from app.core.assist.ranking import TIE_DECIMALS, rank
from app.core.assist.types import Candidate, CheckedSuggestion, Generator


def assert_ranked(suggestions) -> None:
    """Fooling first; in each group the best of every edit type by shift, then the rest by shift."""
    fooling = [s for s in suggestions if s.fools]
    assert list(suggestions[:len(fooling)]) == fooling
    for group in (fooling, [s for s in suggestions if not s.fools]):
        types = {s.candidate.edit_type for s in group}
        leaders, rest = group[:len(types)], group[len(types):]
        assert {s.candidate.edit_type for s in leaders} == types  # one of each type before a second of any
        for part in (leaders, rest):
            shifts = [round(s.shift, TIE_DECIMALS) for s in part]
            assert shifts == sorted(shifts, reverse=True)
        for s in rest:  # each type's leader moved the model at least as far as its others
            leader = next(x for x in leaders if x.candidate.edit_type == s.candidate.edit_type)
            assert round(leader.shift, TIE_DECIMALS) >= round(s.shift, TIE_DECIMALS)


def checked(text: str, generator: Generator, edit_type: str, *, fools: bool, shift: float,
            claimed: str | None = None) -> CheckedSuggestion:
    hate = 0.9 - shift
    return CheckedSuggestion(Candidate(text, generator, edit_type, claimed_label=claimed),
                             {"hate": hate, "not hate": 1 - hate}, "hate" if hate > 0.5 else "not hate", fools, shift)


def test_the_best_of_each_edit_type_comes_before_a_second_of_any():
    substitutions = [checked(f"sub {k}", Generator.SUBSTITUTION, "word_substitution", fools=True, shift=0.89 - k / 100)
                     for k in range(5)]
    leet = checked("l33t", Generator.OBFUSCATION, "leetspeak", fools=True, shift=0.60)
    swap = checked("swap", Generator.RULES, "group_swap_protected", fools=True, shift=0.55, claimed="hate")
    weak_leet = checked("l33t 2", Generator.OBFUSCATION, "leetspeak", fools=False, shift=0.30)
    weak_sub = checked("sub weak", Generator.SUBSTITUTION, "word_substitution", fools=False, shift=0.35)
    weak_glyph = checked("glyph", Generator.OBFUSCATION, "homoglyph", fools=False, shift=0.05)
    weak_sub_2 = checked("sub weaker", Generator.SUBSTITUTION, "word_substitution", fools=False, shift=0.20)
    everything = [weak_glyph, *substitutions, weak_sub_2, weak_leet, swap, leet, weak_sub]
    ranked = rank(everything, text_label="hate")
    # the old order (by shift alone) showed five substitutions; now the writer sees each kind that fools
    assert [s.candidate.text for s in ranked] == [
        "sub 0", "l33t", "swap", "sub 1", "sub 2", "sub 3", "sub 4",  # fooling: one of each type, then by shift
        "sub weak", "l33t 2", "glyph", "sub weaker"]  # the others likewise
    assert leet in ranked[:2]
    assert_ranked(ranked)
    assert rank([], text_label="hate") == []


def test_meaning_keeping_edits_lead_ties_but_not_a_larger_move():
    sub = checked("sub", Generator.SUBSTITUTION, "word_substitution", fools=True, shift=0.801)
    negation = checked("neg", Generator.RULES, "negation_added", fools=True, shift=0.80, claimed="not hate")
    swap = checked("swap", Generator.RULES, "group_swap_protected", fools=True, shift=0.799, claimed="hate")
    glyph = checked("glyph", Generator.OBFUSCATION, "homoglyph", fools=True, shift=0.797)
    stronger = checked("stronger", Generator.RULES, "antonym", fools=True, shift=0.85, claimed="not hate")
    # equal as shown (0.80): the edits that keep the text's label and meaning first, the rest by the generators' order
    assert [s.candidate.text for s in rank([sub, negation, swap, glyph, stronger], text_label="hate")] == [
        "stronger", "swap", "glyph", "sub", "neg"]
    # a rule keeps the meaning only when it claims the text's label: without one (contrast) none does
    assert [s.candidate.text for s in rank([sub, negation, swap], text_label=None)] == ["sub", "neg", "swap"]
