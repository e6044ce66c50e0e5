"""The rule generators on real shipped word lists: what each edit makes, the label it claims, and
care with the writer's text (casing, apostrophes, emoji, zero-width characters, right-to-left)."""

from __future__ import annotations

import pytest

from app.core.assist.base import GeneratorUnavailable
from app.core.assist.lexicon import WordChanges, shipped_lexicon
from app.core.assist.rules import generate, generate_rules
from app.core.assist.types import GenerationContext, Generator, Goal, Unavailable

HATE = ("hate", "not hate")
SENTIMENT = ("positive", "negative", "neutral")
NLI = ("entailment", "neutral", "contradiction")


def rules(text, goal, writer_label=None, model_label="hate", task="hate_speech", labels=HATE, lexicon=None,
          slurs=True):
    ctx = GenerationContext(text, Goal(goal), writer_label, model_label, labels, task, (), lexicon=lexicon,
                            slurs=slurs)
    return {c.text: c for c in generate_rules(ctx)}


def test_negating_hate_claims_not_hate_and_removing_a_negation_claims_hate():
    made = rules("I hate women.", "contrast", "not hate")
    assert made["I don't hate women."].edit_type == "negation_added"
    assert made["I don't hate women."].claimed_label == "not hate"
    assert made["I don't hate women."].generator is Generator.RULES
    back = rules("Let me be clear: I don’t hate women.", "contrast", "hate", "not hate")
    assert back["Let me be clear: I hate women."].edit_type == "negation_removed"
    assert back["Let me be clear: I hate women."].claimed_label == "hate"
    third = rules("She doesn't hate trans people", "contrast", "hate", "not hate")
    assert "She hates trans people" in third
    never = rules("By their nature, women are never attractive.", "contrast", "not hate")
    assert "By their nature, women are attractive." in never
    assert not any("not never" in t for t in never)  # no double negation
    assert "I won’t have to hurt a woman today." in rules("I’ll have to hurt a woman today.", "contrast", "not hate")
    assert "These women don't disgust me." in rules("These women disgust me.", "contrast", "not hate")
    # negating a harmless text proves nothing: no claim of hate from it
    assert not any(c.edit_type == "negation_added" for c in rules("Politicians are scum.", "contrast", "hate",
                                                                    "not hate").values())


def test_a_negation_claims_a_flip_only_where_the_negated_predicate_held_all_the_hate():
    # the conspiracy claim stays when "must" is negated: no "not hate" is claimed, so none is offered
    conspiracy = rules("Jews secretly run the world and must be stopped", "contrast", "not hate")
    assert "Jews secretly run the world and must not be stopped" not in conspiracy
    assert not any(c.edit_type.startswith("negation") for c in conspiracy.values())
    assert not any(c.edit_type.startswith("negation") for c in rules(
        "Jews secretly run the world, they must be stopped", "contrast", "not hate").values())
    assert rules("Jews must be stopped", "contrast", "not hate")["Jews must not be stopped"].claimed_label == "not hate"
    # another hateful clause, or a hateful word before the negated predicate, stays hateful
    for text, negated in (("Muslims are disgusting and should all die", "Muslims are not disgusting and should all die"),
                          ("Muslims are vermin, they should all die", "Muslims are not vermin, they should all die"),
                          ("Those filthy Muslims should be deported.", "Those filthy Muslims should not be deported.")):
        assert negated not in rules(text, "contrast", "not hate"), text
    # one clause whose predicate is the hateful one: the flip is claimed
    for text, negated in (("Women are inferior.", "Women are not inferior."),
                          ("Gay people should be deported.", "Gay people should not be deported."),
                          ("I think Muslims are vermin.", "I don't think Muslims are vermin.")):
        assert rules(text, "contrast", "not hate")[negated].claimed_label == "not hate", text
    assert rules("Black people can't be trusted.", "contrast", "not hate")[
        "Black people can be trusted."].edit_type == "negation_removed"
    assert "Jews stop lying." not in rules("Jews never stop lying.", "contrast", "not hate")  # "lying" stays
    # the fool goal never gets them either: the rule promises neither label for such a text
    assert not any(c.edit_type.startswith("negation") for c in rules(
        "Jews secretly run the world and must be stopped", "fool", "hate").values())
    # removing a negation claims hate only where the text then says something hateful
    assert rules("Women aren't animals.", "contrast", "hate", "not hate")["Women are animals."].claimed_label == "hate"
    assert "Women like football." not in rules("Women don't like football.", "contrast", "hate", "not hate")


def test_the_fool_goal_keeps_the_label_and_the_contrast_goal_changes_it():
    fool = rules("Muslims are disgusting 🤮 and should all die", "fool", "hate")
    assert fool and all(c.claimed_label == "hate" for c in fool.values())
    assert {c.edit_type for c in fool.values()} >= {"group_swap_protected", "implicit_phrasing", "hedging",
                                                   "description_to_slur"}
    assert "Women are disgusting 🤮 and should all die" in fool  # the emoji stays where it was
    contrast = rules("Muslims are disgusting 🤮 and should all die", "contrast", "not hate")
    assert contrast and all(c.claimed_label == "not hate" for c in contrast.values())
    assert "Politicians are disgusting 🤮 and should all die" in contrast
    assert contrast["Politicians are disgusting 🤮 and should all die"].edit_type == "group_to_non_protected"
    to_protected = rules("Politicians are scum.", "contrast", "hate", "not hate")
    assert to_protected["Women are scum."].claimed_label == "hate"


def test_description_to_slur_only_when_the_writer_asks_for_it():
    asked = rules("Women belong in the kitchen, not in parliament", "fool", "hate")
    assert any(c.edit_type == "description_to_slur" for c in asked.values())
    unasked = rules("Women belong in the kitchen, not in parliament", "fool", "hate", slurs=False)
    assert unasked and not any(c.edit_type == "description_to_slur" for c in unasked.values())


def test_casing_is_the_writers():
    made = rules("I really can't stand Muslims, honestly.", "fool", "hate")
    assert "I really can't stand women, honestly." in made  # a name's capital does not carry over
    shout = rules("WOMEN ARE SCUM", "fool", "hate")
    assert "TRANS PEOPLE ARE SCUM" in shout and "I THINK WOMEN ARE SCUM" in shout
    hedge = rules("Women are useless.", "fool", "hate")
    assert "I think women are useless." in hedge  # the capital only started the sentence
    assert "I think Muslims are useless." in rules("Muslims are useless.", "fool", "hate")


def test_counter_speech_and_quotation_framing():
    made = rules('I hate "those" women.', "contrast", "not hate")
    framed = [c for c in made.values() if c.edit_type in ("counter_speech", "quotation")]
    assert {c.edit_type for c in framed} == {"counter_speech", "quotation"}
    assert all(c.claimed_label == "not hate" for c in framed)
    assert "Saying \"I hate 'those' women\" is hateful." in made
    assert not rules("I love women", "contrast", "hate", "not hate").get('Saying "I love women" is hateful.')


def test_right_to_left_and_zero_width_text_is_left_as_written():
    arabic = "أنا أكره women"
    made = rules(arabic, "contrast", "not hate")
    assert not any(c.edit_type in ("counter_speech", "quotation", "hedging") for c in made.values())
    assert "أنا أكره politicians" in made  # the listed word is still swapped, the rest untouched
    hidden = "wo\u200bmen are scum and gay\u200d people too"
    for text in rules(hidden, "fool", "hate"):
        assert "wo\u200bmen" in text or "women" not in text  # never "repairs" an obfuscated word


def test_sentiment_and_nli_rules():
    made = rules("The food was great and the staff were friendly.", "contrast", None, "positive", "sentiment",
                 SENTIMENT)
    assert made["The food was terrible and the staff were friendly."].claimed_label == "negative"
    assert made["The food was not great and the staff were friendly."].edit_type == "negation_added"
    kept = rules("The food was great.", "fool", "positive", "positive", "sentiment", SENTIMENT)
    assert kept["The food was not terrible."].edit_type == "negated_antonym"
    nli = rules("All the men are sitting.", "contrast", None, "entailment", "nli", NLI)
    assert nli["None of the men are sitting."].claimed_label == "contradiction"
    assert nli["All the men are standing."].edit_type == "antonym"
    wanted = rules("Some of the men are sitting.", "contrast", "neutral", "entailment", "nli", NLI)
    assert {c.claimed_label for c in wanted.values()} == {"neutral"}  # only what the writer asked for
    assert wanted["All of the men are sitting."].edit_type == "quantifier_strengthened"
    assert "Some of the men are sitting." in rules("All the men are sitting.", "fool", "entailment", "entailment",
                                                  "nli", NLI)


def test_a_leads_words_are_used_and_no_rule_is_said_so():
    changes = WordChanges(added={"protected_groups": (("Sikhs", "Sikh"),)},
                          removed={"protected_groups": (("trans people", "trans person"),)})
    lexicon = shipped_lexicon("hate_speech").with_changes(changes)
    made = rules("I hate Sikhs.", "fool", "hate", lexicon=lexicon)
    assert "I hate women." in made and "I hate trans people." not in rules("I hate women.", "fool", "hate",
                                                                             lexicon=lexicon)
    ctx = GenerationContext("hello there", Goal.CONTRAST, None, "not hate", HATE, "hate_speech", ())
    with pytest.raises(GeneratorUnavailable) as caught:
        generate(ctx)
    assert caught.value.reason is Unavailable.NO_RULES


def test_at_most_the_limit_and_every_type_before_a_second():
    ctx = GenerationContext("I hate women.", Goal.CONTRAST, "not hate", "hate", HATE, "hate_speech", ())
    few = generate_rules(ctx, limit=4)
    assert len(few) == 4 and len({c.edit_type for c in few}) == 4
    assert len({c.text for c in generate_rules(ctx)}) == len(generate_rules(ctx))


def test_a_contrast_pair_starts_from_the_writers_present_label():
    # the model already says negative (it is fooled): without text_label the rules could not tell
    ctx = GenerationContext("The food was great.", Goal.CONTRAST, "negative", "negative", SENTIMENT, "sentiment", (),
                            text_label="positive")
    made = {c.text: c for c in generate_rules(ctx)}
    assert made["The food was terrible."].claimed_label == "negative"
    assert generate_rules(GenerationContext("The food was great.", Goal.CONTRAST, "negative", "negative", SENTIMENT,
                                            "sentiment", ())) == []
