"""The wellbeing view-models: the failing cases' table masked for a reader who browses masked (the
case opened in Create keeps its text), the blur view's collapse rule, and the profile section."""

from app.core.wellbeing.profile import WellbeingProfile
from app.views.evaluation import build_details
from app.views.wellbeing import (
    LONG_TEXT_CHARS,
    WellbeingChoice,
    blur_view,
    chosen_profile,
    hateful_label,
    wellbeing_section,
)
from tests.views.test_evaluation_views import document


def test_failing_cases_masked_in_the_table_only():
    failing = [{"id": "7", "text": "they are V3RMIN 🐀", "gold": "hate", "predicted": "not hate", "confidence": 0.9,
                "functionality": "derog", "target": None}]
    view = build_details(document(), "m1", "suite", failing, blur_words=("vermin",))
    assert view.failing_table.rows[0][3].text == "they are •••••• 🐀"
    assert view.failing[0].text == "they are V3RMIN 🐀"  # opened in Create: the writer's own editor, unmasked
    assert build_details(document(), "m1", "suite", failing).failing_table.rows[0][3].text == "they are V3RMIN 🐀"


def test_blur_view_masks_when_chosen_and_collapses_long_warned_texts():
    texts = ("short vermin text",)
    masked = blur_view(texts, ("vermin",), masked=True, content_warning="hateful")
    assert masked.texts[0].spans == ((6, 12),) and masked.count == 1 and not masked.collapsed
    plain = blur_view(texts, ("vermin",), masked=False, content_warning="hateful")
    assert plain.texts[0].spans == () and plain.count == 0
    long = ("x " * LONG_TEXT_CHARS,)
    assert blur_view(long, (), masked=False, content_warning="hateful").collapsed  # collapse is for everyone
    assert not blur_view(long, (), masked=False, content_warning=None).collapsed  # only under a warning
    assert hateful_label(("not hate", "hate")) == "hate" and hateful_label(("entailment", "neutral")) is None


def test_profile_section_round_trip_keeps_groups_written_in_as_other():
    profile = WellbeingProfile(opted_out_groups={"hate_speech": ["Roma", "women"]}, blur_browsing=True)
    section = wellbeing_section(profile, [("hate_speech", "Hate speech", ["women", "Muslims"])])
    code, _name, groups = section.tasks[0]
    assert code == "hate_speech" and [(g.group, g.opted_out) for g in groups] == [
        ("women", True), ("Muslims", False), ("Roma", True)]
    choice = WellbeingChoice(True, True, (("hate_speech", (" Roma ", "women", "")), ("nli", ())), 50, 240, 5, 15)
    assert chosen_profile(choice) == profile


def test_the_models_words_join_the_word_lists_masks_as_one_match_of_both_would():
    from app.core.text import WordScore
    from app.views.wellbeing import with_model_words

    texts = ("🐀 those v3rmin rats again", "calm words only")
    scores = {0: [WordScore("v3rmin", 8, 14, 0.9), WordScore("rats", 15, 19, 0.8), WordScore("again", 20, 25, 0.1)],
              1: [WordScore("calm", 0, 4, 0.5)]}
    listed = blur_view(texts, ("vermin",), masked=True, content_warning="hate")
    both = with_model_words(listed, scores)
    assert both == blur_view(texts, ("vermin",), masked=True, content_warning="hate", scores=scores)
    assert both.texts[0].spans == ((9, 15), (16, 20))  # UTF-16: the emoji is two units; "again" scores too low
    assert both.texts[1].spans == ((0, 4),)
    unmasked = blur_view(texts, ("vermin",), masked=False, content_warning=None)
    assert with_model_words(unmasked, scores) is unmasked
