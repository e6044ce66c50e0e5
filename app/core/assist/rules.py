"""Rule generators: edits by type from the task's word lists (``app.core.assist.lexicon``).

Each rule is a plain function ``(GenerationContext) -> list[Candidate]`` that claims the true label
its edit should give the text (``Candidate.claimed_label``): negating the hateful predicate of a
one-clause hateful statement claims "not hate", swapping one protected group for another keeps
"hate". A rule claims only what its edit guarantees; an edit it cannot vouch for is not offered. ``generate_rules`` runs the
rules of the task's family and keeps, for the fool goal, the edits that keep the text's label and,
for the contrast goal, those that claim another one (the target label, when the writer chose one).
The target model checks every candidate afterwards; a person always decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import TypeVar

from app.core.assist.base import GeneratorUnavailable, makes
from app.core.assist.lexicon import Lexicon, shipped_lexicon
from app.core.assist.rule_text import (
    apostrophe_of,
    cased_like,
    find,
    framed,
    is_mostly_rtl,
    prefixed,
    replace_span,
    starts_sentence,
    with_apostrophe,
)
from app.core.assist.types import Candidate, GenerationContext, Generator, Goal, Unavailable

T = TypeVar("T")

PER_RULE = 4  # candidates one rule may offer: the checker's batch is shared with the other generators
MAX_RULE_CANDIDATES = 24
# Plain forms that are also main verbs ("I do my job", "they have cars"): adding "not" after them
# reads wrongly, so negation is added to them only through the verb rule.
_MAIN_VERB_AUXILIARIES = frozenset({"do", "does", "did", "have", "has", "need", ""})
_DO_SUBJECTS = {"i": "don't", "you": "don't", "we": "don't", "they": "don't",
                "he": "doesn't", "she": "doesn't", "it": "doesn't"}

Rule = Callable[[GenerationContext], list[Candidate]]


# --- labels -----------------------------------------------------------------------------------

def lexicon_of(ctx: GenerationContext) -> Lexicon:
    lexicon = ctx.lexicon
    return lexicon if isinstance(lexicon, Lexicon) else shipped_lexicon(ctx.task_code)


def source_label(ctx: GenerationContext) -> str | None:
    """The true label of the text as it stands. Fool: the writer's label (else the model's).
    Contrast: ``writer_label`` is the label wanted after the edit; the text's own is
    ``text_label`` when the writer gave it, else the model's when that differs from the wanted
    one, else in a two-label task the other label."""
    if ctx.goal is Goal.FOOL:
        return ctx.writer_label or ctx.model_label
    if ctx.text_label is not None and ctx.text_label in ctx.labels:  # the writer said what the text is now
        return ctx.text_label
    wanted = ctx.writer_label
    if wanted is None or (ctx.model_label is not None and ctx.model_label != wanted):
        return ctx.model_label
    others = [label for label in ctx.labels if label != wanted]
    return others[0] if len(others) == 1 else None


def _flipped(lexicon: Lexicon, label: str | None, *role_pairs: tuple[str, str]) -> str | None:
    """The label a meaning-reversing edit gives a text labelled ``label``: each role pair maps both ways."""
    for one, other in role_pairs:
        a, b = lexicon.label(one), lexicon.label(other)
        if label is not None and label == a:
            return b
        if label is not None and label == b:
            return a
    return None


# --- edits ------------------------------------------------------------------------------------

def _candidate(text: str, edit_type: str, note: str, claimed: str | None) -> Candidate:
    return Candidate(text=text, generator=Generator.RULES, edit_type=edit_type, note=note, claimed_label=claimed)


def _non_overlapping(text: str, phrases: Iterable[str]) -> list[tuple[int, int, str, str]]:
    """Whole-word matches (start, end, as written, the listed phrase), longest phrase first and
    none overlapping another, in text order."""
    taken: list[tuple[int, int, str, str]] = []
    for phrase in sorted(set(phrases), key=lambda p: (-len(p), p)):
        for m in find(text, phrase):
            if all(m.end <= s or m.start >= e for s, e, _, _ in taken):
                taken.append((m.start, m.end, m.found, phrase))
    return sorted(taken)


def _swap(text: str, start: int, end: int, found: str, listed: str, replacement: str) -> str:
    cased = cased_like(found, with_apostrophe(replacement, apostrophe_of(text)), listed,
                       at_start=starts_sentence(text, start))
    return replace_span(text, start, end, cased)


def _swaps(text: str, mapping: dict[str, list[str]], edit_type: str, claimed: str | None,
           limit: int = PER_RULE, label: Callable[[str, str], str] | None = None) -> list[Candidate]:
    """One candidate per (match, replacement): every listed phrase found is replaced by each of
    its counterparts in turn, first matches first."""
    out: list[Candidate] = []
    matches = _non_overlapping(text, mapping)
    for rank in range(max((len(v) for v in mapping.values()), default=0)):
        for start, end, found, listed in matches:
            options = mapping[listed]
            if rank < len(options):
                new = _swap(text, start, end, found, listed, options[rank])
                note = (label or _arrow)(found, options[rank])
                out.append(_candidate(new, edit_type, note, claimed))
                if len(out) >= limit:
                    return out
    return out


def _arrow(found: str, replacement: str) -> str:
    return f"'{found}' → '{replacement}'" if replacement else f"'{found}' removed"


def _mapping(pairs: Iterable[tuple[str, str]], both_ways: bool = False) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}

    def add(key: str, value: str) -> None:
        values = out.setdefault(key, [])
        if value not in values:
            values.append(value)

    for a, b in pairs:
        add(a, b)
        if both_ways and b:
            add(b, a)
    return out


# --- negation (every family) ------------------------------------------------------------------

def _third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _base_form(word: str, verbs: frozenset[str]) -> str | None:
    lower = word.casefold()
    for base in (lower, lower[:-1] if lower.endswith("s") else "", lower[:-2] if lower.endswith("es") else "",
                 lower[:-3] + "y" if lower.endswith("ies") else ""):
        if base and base in verbs:
            return base
    return None


# A negation site: where the edit starts in the text, the edited text and the note.
Site = tuple[int, str, str]


def _removal_sites(ctx: GenerationContext, limit: int = PER_RULE) -> list[Site]:
    lexicon = lexicon_of(ctx)
    text = ctx.text
    verbs = frozenset(v.casefold() for v in lexicon.words("negatable_verbs"))
    plain_of = {neg.casefold(): plain for neg, plain in lexicon.pairs("negations")}
    out: list[Site] = []
    for start, end, found, listed in _non_overlapping(text, plain_of):
        plain = plain_of[listed.casefold()]
        after = text[end:]
        next_word = after.split(maxsplit=1)[0] if after.strip() else ""
        base = _base_form(next_word, verbs) if plain in ("do", "does", "did") else None
        if base is not None:  # "don't hate" → "hate", "doesn't hate" → "hates": drop the auxiliary
            verb_start = end + len(after) - len(after.lstrip())
            verb_end = verb_start + len(next_word.rstrip(".,!?;:"))
            verb = {"does": _third_person(base), "did": None}.get(plain, base)
            if verb is None:
                continue  # "didn't hate" → "hated" needs the past tense; the plain "did hate" is offered below
            new = text[:start] + cased_like(found, verb, listed, starts_sentence(text, start)) + text[verb_end:]
            out.append((start, new, f"'{text[start:verb_end]}' → '{verb}'"))
        else:
            out.append((start, _swap(text, start, end, found, listed, plain), _arrow(found, plain)))
        if len(out) >= limit:
            break
    return out


def negations_removed(ctx: GenerationContext, claimed: str | None) -> list[Candidate]:
    return [_candidate(new, "negation_removed", note, claimed) for _, new, note in _removal_sites(ctx)]


def _addition_sites(ctx: GenerationContext) -> list[Site]:
    lexicon = lexicon_of(ctx)
    text = ctx.text
    pairs = lexicon.pairs("negations")
    negated_spans = [(s, e) for s, e, _, _ in _non_overlapping(text, [neg for neg, _ in pairs])]
    negated_of: dict[str, str] = {}
    for neg, plain in pairs:
        if plain.casefold() not in _MAIN_VERB_AUXILIARIES:
            negated_of.setdefault(plain.casefold(), neg)
    out: list[Site] = []
    # the words that do the negating: those of a negated form that its plain form lacks ("not", "won't")
    negating = {word for neg, plain in pairs for word in set(neg.casefold().split()) - set(plain.casefold().split())}
    for start, end, found, listed in _non_overlapping(text, negated_of):
        following = text[end:].split(maxsplit=1)
        if any(s < end and start < e for s, e in negated_spans) or (
                following and following[0].strip(".,!?;:").casefold() in negating):
            continue  # already negated ("is not", "isn't", "are never")
        out.append((start, _swap(text, start, end, found, listed, negated_of[listed.casefold()]),
                    _arrow(found, negated_of[listed.casefold()])))
    verbs = frozenset(v.casefold() for v in lexicon.words("negatable_verbs"))
    apostrophe = apostrophe_of(text)
    subjects = dict(_DO_SUBJECTS)  # "I hate …" → "I don't hate …"; "women disgust me" → "women don't disgust me"
    for name in ("protected_groups", "non_protected_groups"):
        subjects.update({plural: "don't" for plural, _ in lexicon.pairs(name)})
    for subject, auxiliary in subjects.items():
        for m in find(text, subject):
            after = text[m.end:]
            next_word = after.split(maxsplit=1)[0] if after.strip() else ""
            base = _base_form(next_word.rstrip(".,!?;:"), verbs)
            if base is None or not after[:1].isspace():
                continue
            verb_start = m.end + len(after) - len(after.lstrip())
            verb_end = verb_start + len(next_word.rstrip(".,!?;:"))
            written = text[verb_start:verb_end]
            negated = with_apostrophe(auxiliary, apostrophe) + " " + base
            if written.isupper() and len(written) > 1:
                negated = negated.upper()
            out.append((verb_start, text[:verb_start] + negated + text[verb_end:], f"'{written}' → '{negated}'"))
    return out


def negations_added(ctx: GenerationContext, claimed: str | None) -> list[Candidate]:
    return [_candidate(new, "negation_added", note, claimed) for _, new, note in _addition_sites(ctx)[:PER_RULE]]


def negation(ctx: GenerationContext, flip: Callable[[str | None], str | None]) -> list[Candidate]:
    """Negation added where the text has none, removed where it has one; each claims ``flip`` of
    the text's label."""
    claimed = flip(source_label(ctx))
    return negations_added(ctx, claimed) + negations_removed(ctx, claimed)


# --- hate speech ------------------------------------------------------------------------------

def _group_forms(lexicon: Lexicon, name: str) -> list[tuple[str, str]]:
    return list(lexicon.pairs(name))


def _group_mapping(groups: list[tuple[str, str]], others: list[tuple[str, str]], limit: int) -> dict[str, list[str]]:
    """Each group form (plural and singular) to up to ``limit`` forms of other groups of the same number."""
    out: dict[str, list[str]] = {}
    for plural, singular in groups:
        choices = [(p, s) for p, s in others if p.casefold() != plural.casefold()][:limit]
        out[plural] = [p for p, _ in choices]
        if singular.casefold() != plural.casefold():
            out.setdefault(singular, [s for _, s in choices])
    return out


def group_swaps(ctx: GenerationContext) -> list[Candidate]:
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    hateful, harmless = lexicon.label("hateful"), lexicon.label("not_hateful")
    protected = _group_forms(lexicon, "protected_groups")
    unprotected = _group_forms(lexicon, "non_protected_groups")
    out = _swaps(ctx.text, _group_mapping(protected, protected, 3), "group_swap_protected", source)
    if source == hateful:
        out += _swaps(ctx.text, _group_mapping(protected, unprotected, 2), "group_to_non_protected", harmless)
    elif source == harmless:  # an attack on politicians becomes one on a protected group
        out += _swaps(ctx.text, _group_mapping(unprotected, protected, 2), "group_to_protected", hateful)
    return out


def slur_swaps(ctx: GenerationContext) -> list[Candidate]:
    """Slur → description keeps the text's label (a reclaimed use stays harmless); description →
    slur only for hateful text (a slur makes a friendly text something else), and only when the
    writer asked for it (``ctx.slurs``): a slur the writer never typed is not shown unasked."""
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    slurs = lexicon.pairs("slurs")
    out = _swaps(ctx.text, _mapping(slurs), "slur_to_description", source)
    if source == lexicon.label("hateful") and ctx.slurs:
        first_slur: dict[str, list[str]] = {}
        for slur, description in slurs:
            first_slur.setdefault(description, [slur])
        out += _swaps(ctx.text, first_slur, "description_to_slur", source)
    return out


def counter_speech(ctx: GenerationContext) -> list[Candidate]:
    """A hateful statement quoted to denounce it, or reported: claims the harmless label."""
    lexicon = lexicon_of(ctx)
    if source_label(ctx) != lexicon.label("hateful") or is_mostly_rtl(ctx.text) or not ctx.text.strip():
        return []
    harmless = lexicon.label("not_hateful")
    out = [_candidate(framed(t, ctx.text), "counter_speech", "quoted to denounce it", harmless)
           for t in lexicon.words("counter_speech")[:PER_RULE]]
    out += [_candidate(framed(t, ctx.text), "quotation", "reported, not endorsed", harmless)
            for t in lexicon.words("quotations")[:2]]
    return out


def _keep_capital(lexicon: Lexicon) -> frozenset[str]:
    """Words that are capitalised wherever they stand (names of groups, "Muslims")."""
    names = {phrase.split()[0] for name in ("protected_groups", "non_protected_groups", "slurs")
             for pair in lexicon.pairs(name) for phrase in pair if phrase[:1].isupper()}
    return frozenset(n.casefold() for n in names)


def hedging(ctx: GenerationContext) -> list[Candidate]:
    """A hedge before the statement: its label stays."""
    lexicon = lexicon_of(ctx)
    if is_mostly_rtl(ctx.text) or not ctx.text.strip():
        return []
    start = ctx.text.lstrip().casefold()
    keep = _keep_capital(lexicon)
    return [_candidate(prefixed(h, ctx.text, keep), "hedging", f"'{h}' put before it", source_label(ctx))
            for h in lexicon.words("hedges") if not start.startswith(h.casefold())][:3]


def implicit_phrasing(ctx: GenerationContext) -> list[Candidate]:
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    if source != lexicon.label("hateful"):
        return []
    return _swaps(ctx.text, _mapping(lexicon.pairs("implicit_phrasings")), "implicit_phrasing", source)


# --- sentiment and NLI --------------------------------------------------------------------------

def antonyms(ctx: GenerationContext, claimed: str | None) -> list[Candidate]:
    return _swaps(ctx.text, _mapping(lexicon_of(ctx).pairs("antonyms"), both_ways=True), "antonym", claimed)


def negated_antonyms(ctx: GenerationContext) -> list[Candidate]:
    """"good" → "not bad": about the same sentiment in other words (a litotes)."""
    mapping = {k: ["not " + v for v in vs] for k, vs in _mapping(lexicon_of(ctx).pairs("antonyms"), True).items()}
    return _swaps(ctx.text, mapping, "negated_antonym", source_label(ctx), limit=2)


def quantifiers(ctx: GenerationContext, claimed: str | None) -> list[Candidate]:
    pairs = lexicon_of(ctx).pairs("quantifier_negations")
    return _swaps(ctx.text, _mapping(pairs, both_ways=True), "quantifier", claimed)


# --- the families -------------------------------------------------------------------------------

def _mentions_group(ctx: GenerationContext, lexicon: Lexicon) -> bool:
    phrases = [p for name in ("protected_groups", "slurs") for pair in lexicon.pairs(name) for p in pair if p]
    return bool(_non_overlapping(ctx.text, phrases))


# --- what a negation can promise in hate speech --------------------------------------------------
# Negating one predicate flips a text's label only when that predicate was all that made it
# hateful: "Jews secretly run the world and must not be stopped" still spreads the conspiracy.

# Words that start another clause, whose predicate a negation elsewhere leaves as it was.
_CLAUSE_WORDS = frozenset("""and but or nor because cause cuz coz so yet while whereas although though since unless
until who whom whose which that where""".split())
_TOKENS = re.compile(r"[^\W_]+(?:['\u2019\u02bc][^\W_]+)*|\n|[^\w\s]")
_CLAUSE_MARKS = frozenset(";:()[]{}\u2014\u2013\n.!?")
_CONTRACTED_VERB = re.compile(r"['\u2019\u02bc](?:s|re|m|ve|ll|d)$", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _stems(word: str) -> frozenset[str]:
    """``word`` and the base forms it may be inflected from (plurals, -ed, -ing)."""
    w = word.casefold()
    out = {w}
    for suffix, tail in (("s", ""), ("es", ""), ("ies", "y"), ("ed", ""), ("ed", "e"), ("ing", ""), ("ing", "e")):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            out.add(w[:-len(suffix)] + tail)
    out |= {stem[:-1] for stem in list(out) if len(stem) > 3 and stem[-1] == stem[-2]}  # "stopped", "shooting"
    return frozenset(out)


class _HatefulReading:
    """Where a text (of the hate speech task) says something hateful, as its word lists tell, and
    how it falls into clauses."""

    def __init__(self, lexicon: Lexicon):
        listed = [*lexicon.words("hateful_predicates"), *(slur for slur, _ in lexicon.pairs("slurs"))]
        self.words = frozenset(p.casefold() for p in listed if " " not in p)
        self.phrases = tuple(p for p in listed if " " in p)
        # the auxiliaries of the negation list, plain and negated ("is", "can't"), not its "all of"
        auxiliaries = {form.casefold() for neg, base in lexicon.pairs("negations")
                       if base and " " not in base and (neg.endswith(" not") or neg.endswith("n't") or neg == "cannot")
                       for form in (neg, base) if " " not in form}
        self.verbs = (auxiliaries | {v.casefold() for v in lexicon.words("negatable_verbs")} | self.words
                      | {p.split()[0].casefold() for p in self.phrases})  # "run" of "run the world"

    def hateful_at(self, text: str) -> list[int]:
        """Where each hateful word or phrase starts."""
        found = [m.start() for m in _TOKENS.finditer(text) if _stems(m.group()) & self.words]
        return sorted(found + [m.start for phrase in self.phrases for m in find(text, phrase)])

    def _has_verb(self, tokens: list[re.Match[str]]) -> bool:
        return any(_stems(t.group()) & self.verbs or _CONTRACTED_VERB.search(t.group()) for t in tokens)

    def clauses(self, text: str) -> list[tuple[int, int]]:
        """The text's clauses as (start, end): parts between joining words ("and", "who") or marks
        (";", a sentence's end), and between commas where both sides have a verb of their own."""
        parts: list[list[re.Match[str]]] = [[]]
        for token in _TOKENS.finditer(text):
            word = token.group()
            if word.casefold() in _CLAUSE_WORDS or word in _CLAUSE_MARKS:
                parts.append([])
            else:
                parts[-1].append(token)
        clauses: list[tuple[int, int]] = []
        for part in parts:
            pieces: list[list[re.Match[str]]] = [[]]
            for token in part:
                if token.group() == ",":
                    pieces.append([])
                else:
                    pieces[-1].append(token)
            merged: list[list[re.Match[str]]] = []
            for piece in pieces:  # a piece without a verb ("By their nature,") belongs to its neighbour
                if merged and not (self._has_verb(piece) and self._has_verb(merged[-1])):
                    merged[-1] += piece
                else:
                    merged.append(piece)
            if len(merged) > 1 and not self._has_verb(merged[0]):
                merged[1] = merged[0] + merged[1]
                del merged[0]
            clauses += [(piece[0].start(), piece[-1].end()) for piece in merged
                        if any(t.group()[:1].isalnum() for t in piece)]
        return clauses

    def hateful_after(self, text: str) -> Callable[[int], bool]:
        """Whether the clause of ``text`` that holds a place says something hateful from there on."""
        clauses, found = self.clauses(text), self.hateful_at(text)

        def after(at: int) -> bool:
            end = next((e for s, e in clauses if s <= at < e), at)
            return any(at <= p < end for p in found)

        return after


def hate_negation(ctx: GenerationContext) -> list[Candidate]:
    """Negating the hateful predicate of a hateful text claims "not hate"; removing the negation
    from harmless text about a protected group so that it says something hateful ("I don't hate
    women") claims "hate". Each claim is made only where the edit guarantees it (the text is one
    clause, and the negated predicate holds all its hate); other negations are not offered.
    Negating harmless text proves nothing."""
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    hateful, harmless = lexicon.label("hateful"), lexicon.label("not_hateful")
    reading = _HatefulReading(lexicon)
    if source == hateful:
        if len(reading.clauses(ctx.text)) != 1:  # another clause may stay hateful
            return []
        found = reading.hateful_at(ctx.text)
        # added: the negated predicate holds every hateful word; removed: none is left ("never attractive")
        added = [_candidate(new, "negation_added", note, harmless) for at, new, note in _addition_sites(ctx)
                 if found and found[0] >= at]
        removed = [_candidate(new, "negation_removed", note, harmless) for _, new, note in _removal_sites(ctx)
                   if not reading.hateful_at(new)]
        return added[:PER_RULE] + removed
    if source == harmless and _mentions_group(ctx, lexicon):
        # a removal drops negating words only: the hateful words stand where they stood
        hateful_after = reading.hateful_after(ctx.text)
        return [_candidate(new, "negation_removed", note, hateful) for at, new, note in _removal_sites(ctx)
                if hateful_after(at)]
    return []


def hate_speech_rules(ctx: GenerationContext) -> list[Candidate]:
    return (hate_negation(ctx) + group_swaps(ctx) + counter_speech(ctx) + implicit_phrasing(ctx)
            + hedging(ctx) + slur_swaps(ctx))


def sentiment_rules(ctx: GenerationContext) -> list[Candidate]:
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    flipped = _flipped(lexicon, source, ("positive", "negative"))
    return (negation(ctx, lambda _: flipped) + antonyms(ctx, flipped) + quantifiers(ctx, flipped)
            + negated_antonyms(ctx))


def nli_rules(ctx: GenerationContext) -> list[Candidate]:
    lexicon = lexicon_of(ctx)
    source = source_label(ctx)
    entailment, neutral = lexicon.label("entailment"), lexicon.label("neutral")
    contradiction = lexicon.label("contradiction")
    negated = _flipped(lexicon, source, ("entailment", "contradiction"))
    weakenings = lexicon.pairs("quantifier_weakenings")
    out = negation(ctx, lambda _: negated)
    out += antonyms(ctx, contradiction if source == entailment else None)
    out += quantifiers(ctx, contradiction if source == entailment else None)
    # all → some still follows from what entailed "all"; some → all no longer does
    out += _swaps(ctx.text, _mapping(weakenings), "quantifier_weakened", entailment if source == entailment else None)
    out += _swaps(ctx.text, _mapping((weak, strong) for strong, weak in weakenings), "quantifier_strengthened",
                  neutral if source == entailment else None)
    return out


FAMILY_RULES: dict[str, Rule] = {"hate_speech": hate_speech_rules, "sentiment": sentiment_rules, "nli": nli_rules}


def _wanted(ctx: GenerationContext, candidate: Candidate, source: str | None) -> bool:
    if candidate.text == ctx.text or candidate.claimed_label is None or source is None:
        return False
    if ctx.goal is Goal.FOOL:
        return candidate.claimed_label == source
    return candidate.claimed_label != source and ctx.writer_label in (None, candidate.claimed_label)


def round_robin(items: Iterable[T], edit_type: Callable[[T], str]) -> Iterator[T]:
    """Round-robin over edit types, so a cap keeps every type represented."""
    by_type: dict[str, list[T]] = {}
    for item in items:
        by_type.setdefault(edit_type(item), []).append(item)
    queues = list(by_type.values())
    for rank in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if rank < len(queue):
                yield queue[rank]


def generate_rules(ctx: GenerationContext, limit: int = MAX_RULE_CANDIDATES) -> list[Candidate]:
    """The rule candidates for ``ctx``: those of the task's family that serve the goal, distinct,
    every edit type represented before any gets a second, at most ``limit``."""
    lexicon = lexicon_of(ctx)
    family = FAMILY_RULES.get(lexicon.family or "")
    if family is None or not ctx.text.strip():
        return []
    if ctx.lexicon is not lexicon:
        ctx = replace(ctx, lexicon=lexicon)
    source = source_label(ctx)
    seen = {ctx.text}
    out: list[Candidate] = []
    for candidate in round_robin([c for c in family(ctx) if _wanted(ctx, c, source)], lambda c: c.edit_type):
        if candidate.text not in seen:
            seen.add(candidate.text)
            out.append(candidate)
            if len(out) >= limit:
                break
    return out


@makes(Generator.RULES)
def generate(ctx: GenerationContext) -> list[Candidate]:
    """The registered generator: ``generate_rules``, or why no rule applies."""
    found = generate_rules(ctx)
    if not found:
        raise GeneratorUnavailable(Unavailable.NO_RULES)
    return found
