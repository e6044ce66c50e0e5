"""The Dashboard's assistant section, as a view-model: rows, headline and note from a split."""

from app.core.services.assistant_split import AssistantSplit, SplitGroup
from app.core.tasks import figures as rule
from app.views.assistant_split import build_split, mer_difference_interval, seconds, wilson_interval


def side(arm, submitted, applied=0, fooled=0, validated=0, decided=0, rejected=0, median=None):
    return rule.ArmFigures("k", arm, submitted, applied, fooled, validated, decided, rejected, median)


def test_rows_pair_each_group_and_the_headline_compares_the_arms():
    a, u = side("assisted", 40, 10, 30, 20, 20, 5, 45.0), side("unassisted", 50, 0, 20, 15, 25, 5, 150.0)
    split = AssistantSplit("annotator", [SplitGroup("ann", "Ann", a, u), SplitGroup("bob", "Bob", None, u)], a, u, 3)
    view = build_split(split)
    assert view.headers[:3] == ("Annotator", "Arm", "Examples") and not view.empty
    assert [r.cells[:4] for r in view.rows] == [
        ("All in view", "Assisted", "40", "10 (25.0%)"), ("", "Unassisted", "50", "–"),
        ("Ann", "Assisted", "40", "10 (25.0%)"), ("", "Unassisted", "50", "–"), ("Bob", "Unassisted", "50", "–")]
    assert view.rows[2].cells[4:] == ("75.0%", "50.0%", "25.0%", "45 s")
    assert view.rows[3].cells[4:] == ("40.0%", "30.0%", "20.0%", "2.5 min")
    assert "MER 75.0% vs 40.0% (+35.0 points; 95% CI" in view.headline
    assert "applied to 10 of 40 assisted examples" in view.headline and "noise" not in view.headline
    assert view.note.startswith("3 examples in view were written without the assistant")


def test_few_examples_and_a_missing_arm_are_said_plainly():
    a, u = side("assisted", 4, 1, 3), side("unassisted", 2, 0, 1)
    assert "mostly noise" in build_split(AssistantSplit("round", [], a, u, 1)).headline
    assert build_split(AssistantSplit("round", [], a, u, 1)).note.startswith("1 example in view was written")
    only = build_split(AssistantSplit("round", [SplitGroup("r", "Hate · round 1", a, None)], a, None, 0))
    assert only.headers[0] == "Round" and "No unassisted examples in view" in only.headline
    nothing = build_split(AssistantSplit("annotator", [], None, None, 5))
    assert nothing.empty and "No examples with an assistant arm" in nothing.headline


def test_the_interval_and_times():
    low, high = mer_difference_interval(side("assisted", 100, fooled=50), side("unassisted", 100, fooled=30))
    assert (round(low, 4), round(high, 4)) == (0.0642, 0.3258)  # Newcombe's hybrid score interval
    assert tuple(round(x, 4) for x in wilson_interval(50, 100)) == (0.4038, 0.5962)
    low, high = mer_difference_interval(side("assisted", 4, fooled=4), side("unassisted", 3, fooled=0))
    assert -1 <= low < high <= 1  # within bounds where a normal approximation would not be
    assert mer_difference_interval(side("assisted", 0), side("unassisted", 5)) is None
    assert (seconds(None), seconds(59.4), seconds(600)) == ("–", "59 s", "10.0 min")


def test_the_view_names_the_sides_as_the_figures_do():
    from app.views import assistant_split

    assert (assistant_split.ASSISTED, assistant_split.UNASSISTED) == (rule.ASSISTED, rule.UNASSISTED)
