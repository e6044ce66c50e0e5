from app.core.desk import Desk
from tests.app.test_cli import assert_clean_failure, dynadesk


def test_a_lead_runs_rounds_from_the_command_line(data_dir, tmp_path):
    assert dynadesk("init", "--name", "Lee Lead", "--role", "lead", "--without-default-model", data_dir=data_dir).returncode == 0
    with Desk(data_dir) as desk:
        task = desk.tasks.task("hate_speech")
        for name, sha in (("base", "aa" * 32), ("strong", "bb" * 32), ("stronger", "cc" * 32)):
            desk.models.register(name, "onnx", sha, task_id=task.id)
    prompts = tmp_path / "prompts.csv"
    prompts.write_text("id,sentence\n1,They should go back\n2,Lovely weather today\n2,Lovely weather today\n",
                       encoding="utf-8")

    result = dynadesk("rounds", "attach", "--task", "hate_speech", "--model", "base", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    result = dynadesk("rounds", "import-contexts", prompts, "--task", "hate_speech", "--column", "sentence",
                      "--tag", "seed", data_dir=data_dir)
    assert "Added 2 context(s); 1 were already in the round." in result.stdout
    result = dynadesk("rounds", "set", "--task", "hate_speech", "--label-start", "random", "--policy", "least_fooled",
                      "--goal", "Find implicit hate", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    shown = dynadesk("rounds", "show", "--task", "hate_speech", data_dir=data_dir).stdout
    assert "goal message:  Find implicit hate" in shown and "starts random" in shown
    assert "served by least_fooled" in shown and "base (aaaaaaaaaaaa)" in shown and "Lovely weather today" in shown

    result = dynadesk("rounds", "open", "--task", "hate_speech", "--model", "strong", "--model", "bbbbbbbb",
                      data_dir=data_dir)
    assert_clean_failure(result, "A model can appear only once")
    result = dynadesk("rounds", "open", "--task", "hate_speech", "--model", "strong", "--model", "stronger",
                      data_dir=data_dir)
    assert result.returncode == 0 and "Opened hate_speech round 2" in result.stdout
    listing = dynadesk("rounds", "list", "--task", "hate_speech", data_dir=data_dir).stdout
    assert "1      closed  base" in listing and "2      open    strong, stronger" in listing
    assert "goal message:  Find implicit hate" in dynadesk("rounds", "show", "--task", "hate_speech",
                                                           data_dir=data_dir).stdout


def test_round_commands_fail_clearly(data_dir):
    dynadesk("init", "--name", "Ana", "--role", "annotator", "--without-default-model", data_dir=data_dir)
    assert_clean_failure(dynadesk("rounds", "close", "--task", "hate_speech", data_dir=data_dir),
                         "Only leads and owners can change rounds")
    assert_clean_failure(dynadesk("rounds", "open", "--task", "hate_speech", "--model", "ghost", data_dir=data_dir),
                         "'ghost' matches no registered model")
    assert_clean_failure(dynadesk("rounds", "show", "--task", "hate_speech", "--round", "7", data_dir=data_dir),
                         "has no round 7")
    assert_clean_failure(dynadesk("rounds", "set", "--task", "hate_speech", "--label-start", "fixed",
                                  data_dir=data_dir), "fixed goal label needs 'fixed_label'")
