"""The round's assistant setting: who sets it, and how A-B splits each writer's sessions."""

import math
import random
import uuid
from collections import Counter

import pytest

from app.cli import main
from app.core.assist.arms import next_session_number, session_arm
from app.core.assist.types import AssistantMode
from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.core.services.rounds import parse_settings


def test_off_gives_no_arm_and_on_gives_every_session_the_assistant():
    writer = uuid.uuid4()
    assert [session_arm(AssistantMode.OFF, writer, n) for n in range(1, 5)] == [None] * 4
    assert [session_arm("on", writer, n) for n in range(1, 5)] == ["on"] * 4
    assert session_arm(None, writer, 1) is None  # a round from before the setting


def test_ab_is_the_same_for_a_session_wherever_and_whenever_it_is_asked():
    writer, round_key = uuid.uuid4(), "hate_speech/3"
    first = [session_arm("ab", writer, n, round_key=round_key) for n in range(1, 41)]
    assert [session_arm("ab", str(writer), n, round_key=round_key) for n in range(1, 41)] == first


def test_ab_balances_every_writer_within_one_session_however_few_they_write():
    round_key = "nli/1"
    for _ in range(300):
        writer = uuid.uuid4()
        arms = [session_arm("ab", writer, n, round_key=round_key) for n in range(1, 30)]
        for written in range(1, 30):
            on = arms[:written].count("on")
            assert abs(2 * on - written) <= 1, (writer, arms[:written])


def test_ab_is_a_fair_coin_across_writers_and_rounds():
    """Which session of a pair is assisted: a fair coin, unrelated between pairs, writers and rounds."""
    rng = random.Random(20)
    firsts, same_as_next_pair, same_in_next_round = [], 0, 0
    n = 4000
    for _ in range(n):
        writer = uuid.UUID(int=rng.getrandbits(128))
        round_a, round_b = (f"hate_speech/{rng.randrange(1, 10**6)}" for _ in range(2))
        first = session_arm("ab", writer, 1, round_key=round_a)
        firsts.append(first)
        same_as_next_pair += first == session_arm("ab", writer, 3, round_key=round_a)
        same_in_next_round += first == session_arm("ab", writer, 1, round_key=round_b)
    sigma = math.sqrt(n) / 2  # a fair coin's count: mean n/2, sd sqrt(n)/2; 4 sd: fails by chance ~1 in 16,000
    for count in (Counter(firsts)["on"], same_as_next_pair, same_in_next_round):
        assert abs(count - n / 2) < 4 * sigma, count
    # no writer's sequence is a fixed pattern: the 16 possible first-four-pair patterns all occur evenly
    patterns = Counter(tuple(session_arm("ab", uuid.UUID(int=rng.getrandbits(128)), n) for n in (1, 3, 5, 7))
                       for _ in range(n))
    assert len(patterns) == 16
    chi_square = sum((c - n / 16) ** 2 / (n / 16) for c in patterns.values())
    assert chi_square < 37.7  # the 0.999 quantile of chi-square with 15 degrees of freedom


def test_session_numbers_count_from_one_and_a_bad_one_is_refused():
    assert next_session_number([]) == 1
    assert next_session_number([None, 2, 1, None]) == 3
    with pytest.raises(ValueError, match="counts from 1"):
        session_arm("ab", uuid.uuid4(), 0)
    with pytest.raises(ValueError):
        session_arm("sometimes", uuid.uuid4(), 1)


def test_the_setting_defaults_to_off_and_only_leads_change_it(desk, people):
    round_ = desk.tasks.round("hate_speech")
    assert desk.rounds.settings(round_).assistant is AssistantMode.OFF
    with pytest.raises(DynadeskError, match="Only leads and owners"):
        desk.rounds.update(round_.id, people.author.id, settings=parse_settings({"assistant": "on"}))
    with pytest.raises(DynadeskError, match="Round setting 'assistant'"):
        parse_settings({"assistant": "sometimes"})
    desk.rounds.update(round_.id, people.lead.id, settings=parse_settings({"assistant": "ab"}))
    assert desk.rounds.summary("hate_speech").settings.assistant is AssistantMode.AB
    assert desk.tasks.round("hate_speech").settings["assistant"] == "ab"  # stored (and synced) as plain JSON


def run(capsys, data_dir, *args) -> tuple[int, str, str]:
    """The CLI in-process, as `dynadesk --data-dir D ...`."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(data_dir), *map(str, args)])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_a_lead_sets_the_assistant_from_the_command_line_and_the_next_round_keeps_it(capsys, data_dir):
    assert run(capsys, data_dir, "init", "--name", "Lee Lead", "--role", "lead", "--without-default-model")[0] == 0
    with Desk(data_dir) as desk:
        desk.models.register("base", "onnx", "aa" * 32, task_id=desk.tasks.task("hate_speech").id)
    assert "assistant:     off" in run(capsys, data_dir, "rounds", "show", "--task", "hate_speech")[1]
    code, out, err = run(capsys, data_dir, "rounds", "set", "--task", "hate_speech", "--assistant", "ab")
    assert code == 0, err
    shown = run(capsys, data_dir, "rounds", "show", "--task", "hate_speech")[1]
    assert "assistant:     A-B: on for a random half of each writer's sessions" in shown
    assert run(capsys, data_dir, "rounds", "open", "--task", "hate_speech", "--model", "base")[0] == 0
    assert "assistant:     A-B" in run(capsys, data_dir, "rounds", "show", "--task", "hate_speech")[1]
    code, out, err = run(capsys, data_dir, "rounds", "set", "--task", "hate_speech", "--assistant", "always")
    assert code != 0 and "'always' is not one of 'off', 'on', 'ab'" in err and "Traceback" not in out + err
