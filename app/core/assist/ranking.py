"""The order the writer sees checked suggestions in.

The rule: suggestions that fool the model first, then by how far the model's probability
of the text's label moved. Sorted by shift alone, one edit type crowds out the rest: on the default
model HotFlip word substitutions move the probability most and fill the top five with
meaning-changing edits. So within the fooling ones, and within the others, the best suggestion of
each edit type comes first (those ordered by shift), then the rest by shift: the writer sees one
edit of every kind that works before a second of any.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.core.assist.types import CheckedSuggestion, Generator

# Shifts equal to this many decimals are a tie: the panel and `dynadesk suggest` show probabilities
# to two decimals, so a smaller difference is one the writer cannot see and should not decide.
TIE_DECIMALS = 2


def keeps_meaning(suggestion: CheckedSuggestion, text_label: str | None) -> bool:
    """Keeps the text's meaning by construction: an obfuscation (same words, another spelling) or a
    rule that claims the label the text has (group swap, hedging, slur ↔ description)."""
    candidate = suggestion.candidate
    if candidate.generator is Generator.OBFUSCATION:
        return True
    return (candidate.generator is Generator.RULES and text_label is not None
            and candidate.claimed_label == text_label)


def rank(checked: Iterable[CheckedSuggestion], *, text_label: str | None = None) -> list[CheckedSuggestion]:
    """Fooling first; in each group the best of every edit type (by shift), then the rest by shift.

    ``text_label``: the label the text has now (the fool goal's writer label), which a rule must
    claim to count as meaning-keeping; None where no edit keeps the label (contrast).
    Among shifts that tie (equal to ``TIE_DECIMALS``) a meaning-keeping edit goes first: with the
    fool goal the writer can submit it as it is, while a substitution that moves the model as far
    needs them to check it still says what they meant. Not beyond ties: the issue orders by shift,
    and a stronger edit of another type must not be hidden behind a weaker meaning-keeping one.
    Otherwise the generators' order is kept (stable).
    """
    checked = list(checked)
    return (_varied([s for s in checked if s.fools], text_label)
            + _varied([s for s in checked if not s.fools], text_label))


def _varied(group: Sequence[CheckedSuggestion], text_label: str | None) -> list[CheckedSuggestion]:
    by_shift = sorted(range(len(group)), key=lambda i: (-round(group[i].shift, TIE_DECIMALS),
                                                        not keeps_meaning(group[i], text_label)))
    leaders: list[int] = []
    types_seen: set[str] = set()
    for i in by_shift:
        if group[i].candidate.edit_type not in types_seen:
            types_seen.add(group[i].candidate.edit_type)
            leaders.append(i)
    led = set(leaders)
    return [group[i] for i in leaders] + [group[i] for i in by_shift if i not in led]
