import textwrap

import pytest

from app.core.errors import TaskDefinitionError
from app.core.tasks.definition import MetadataKind, builtin_tasks_dir, load_catalog, load_task_file

GOOD = """
code: toxicity
name: Toxicity
inputs:
  - {name: text, label: Text}
labels: [toxic, fine]
metadata:
  - {name: severity, label: Severity, kind: choice, choices: [mild, severe], required: true,
     applies_when: {label: [toxic]}}
"""


def write(tmp_path, text, name="task.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_four_tasks_ship_and_match_the_design():
    catalog = load_catalog(builtin_tasks_dir())
    assert set(catalog.tasks) == {"hate_speech", "sentiment", "nli", "extractive_qa"}
    hate = catalog["hate_speech"]
    assert hate.labels == ["hate", "not hate"]
    assert hate.agreement_threshold == 3
    assert hate.content_warning and hate.guidelines.startswith("## ")
    hate_type = hate.metadata_field("hate_type")
    assert hate_type.kind == MetadataKind.CHOICE
    assert hate_type.choices == ["animosity", "derogation", "dehumanization", "threatening language",
                                 "support for hateful entities"]
    targets = hate.metadata_field("target_groups")
    assert targets.kind == MetadataKind.MULTI_CHOICE and targets.allow_other
    assert {"women", "trans people", "gay people", "black people", "disabled people", "Muslims",
            "Jewish people", "immigrants", "refugees"} <= set(targets.choices)
    assert hate_type.applies("hate") and not hate_type.applies("not hate") and not targets.applies("not hate")
    assert catalog["sentiment"].labels == ["positive", "negative", "neutral"] and catalog["sentiment"].prompt.enabled
    nli = catalog["nli"]
    assert nli.labels == ["entailment", "neutral", "contradiction"]
    assert [f.kind.value for f in nli.inputs] == ["context", "written"]
    qa = catalog["extractive_qa"]
    assert qa.is_extractive and qa.answer.span_of == "context"
    assert qa.fooled.metric.value == "span_f1" and qa.fooled.threshold == 0.4


def test_a_user_adds_a_task_by_dropping_a_yaml_file(tmp_path, data_dir):
    (data_dir / "tasks").mkdir()
    write(data_dir / "tasks", GOOD, "toxicity.yaml")
    from app.core.desk import Desk

    with Desk(data_dir) as desk:
        assert "toxicity" in {t.code for t in desk.tasks.tasks()}
        assert desk.tasks.round("toxicity").number == 1


@pytest.mark.parametrize(
    "text, field, problem",
    [
        (GOOD.replace("code: toxicity", "code: Toxicity!"), "code", "String should match pattern"),
        (GOOD.replace("name: Toxicity\n", ""), "name", "required field is missing"),
        (GOOD + "colour: blue\n", "colour", "unknown field"),
        (GOOD.replace("labels: [toxic, fine]", "labels: [toxic]"), "(top level)", "at least two distinct labels"),
        (GOOD.replace("kind: choice", "kind: dropdown"), "metadata.0.kind", "Input should be"),
        (GOOD.replace("choices: [mild, severe]", "choices: []"), "metadata.0", "non-empty 'choices'"),
        (GOOD.replace("label: [toxic]", "label: [nasty]"), "(top level)", "unknown label(s) ['nasty']"),
        (GOOD + "agreement_threshold: 0\n", "agreement_threshold", "greater than or equal to 1"),
        ("code: x\n  - broken: [\n", "(file)", "not valid YAML at line"),
        ("- just\n- a list\n", "(top level)", "mapping"),
    ],
)
def test_a_bad_definition_names_the_file_the_field_and_the_problem(tmp_path, text, field, problem):
    path = write(tmp_path, text)
    with pytest.raises(TaskDefinitionError) as caught:
        load_task_file(path)
    error = caught.value
    assert error.source == str(path)
    assert error.field == field
    assert problem in error.problem
    assert str(path) in str(error) and field in str(error)


def test_two_files_with_one_code_are_refused(tmp_path):
    write(tmp_path, GOOD, "a.yaml")
    write(tmp_path, GOOD, "b.yaml")
    catalog = load_catalog(tmp_path)
    assert catalog.sources["toxicity"].name == "a.yaml"  # the first stays; the second is reported, not loaded
    [problem] = catalog.problems
    assert isinstance(problem, TaskDefinitionError) and problem.source.endswith("b.yaml")
    assert "already defined in" in str(problem) and "a.yaml" in str(problem)


def test_a_changed_definition_bumps_the_task_revision(tmp_path, data_dir):
    from app.core.desk import Desk

    (data_dir / "tasks").mkdir()
    path = write(data_dir / "tasks", GOOD, "toxicity.yaml")
    with Desk(data_dir) as desk:
        before = desk.tasks.task("toxicity").revision
    path.write_text(textwrap.dedent(GOOD).replace("name: Toxicity", "name: Toxicity v2"), encoding="utf-8")
    with Desk(data_dir) as desk:
        task = desk.tasks.task("toxicity")
        assert task.name == "Toxicity v2" and task.revision == before + 1
