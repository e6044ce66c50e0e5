"""`dynadesk eval` end to end: JSON and HTML written, figures recomputable, clear errors."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from app.core import paths
from app.core.desk import Desk
from app.core.services.evaluation_scoring import compute_results
from app.core.services.target_models import register_model
from tests.app.test_cli import assert_clean_failure, dynadesk
from tests.conftest import shared_file


@pytest.fixture
def small_suite(tmp_path):
    """The first 120 rows of the shared HateCheck file (kept under tmp_path, never committed)."""
    source = shared_file("hatecheck", "test_suite_cases_dev.csv")
    with open(source, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    target = tmp_path / "suite.csv"
    with open(target, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows[:121])
    return target


@pytest.fixture
def registered(data_dir, hate_trigger_model_dir):
    with Desk(data_dir) as desk:
        register_model(desk, hate_trigger_model_dir, name="banana detector", task_code="hate_speech")
    return data_dir


def test_eval_writes_json_and_html(registered, small_suite, tmp_path):
    out = tmp_path / "out"
    result = dynadesk("eval", "--models", "banana detector", "--suite", small_suite, "--rounds", "all",
                      "--weight", "performance=2", "--sample", "20", "--out", out, data_dir=registered)
    assert result.returncode == 0, result.stderr
    assert "accuracy" in result.stdout and "score" in result.stdout and f"Wrote {out}" in result.stdout
    assert "suite (HateCheck, 120 cases)" in result.stderr and "Round 1: no validated examples yet" in result.stderr
    doc = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert doc["options"]["weights"]["performance"] == 2.0
    assert doc["results"]["m1"]["sets"]["suite"]["n"] == 120
    assert compute_results(doc) == doc["results"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<svg" in html and "banana detector" in html


def test_eval_errors_are_clear(registered, small_suite, tmp_path):
    out = tmp_path / "out"
    assert_clean_failure(dynadesk("eval", "--models", "banana detector", "--suite", tmp_path / "nope.csv",
                                  "--out", out, data_dir=registered), "There is no HateCheck suite file")
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nhello,hate\n", encoding="utf-8")
    assert_clean_failure(dynadesk("eval", "--models", "banana detector", "--suite", bad, "--out", out,
                                  data_dir=registered), "not a HateCheck suite: it lacks the column(s) functionality")
    assert_clean_failure(dynadesk("eval", "--models", "nobody", "--suite", small_suite, "--out", out,
                                  data_dir=registered), "No registered model is called 'nobody'")
    assert_clean_failure(dynadesk("eval", "--models", "banana detector", "--out", out, data_dir=registered),
                         "nothing to evaluate")
    assert_clean_failure(dynadesk("eval", "--models", "banana detector", "--suite", small_suite, "--weight", "speed=2",
                                  "--out", out, data_dir=registered), "Unknown weight(s) speed")
    assert_clean_failure(dynadesk("eval", "--models", "banana detector", "--rounds", "one", "--out", out,
                                  data_dir=registered), "is not 'all', 'none' or round numbers")
    assert not (out / "evaluation.json").exists()


def test_eval_of_the_default_model(data_dir, default_model_cache, small_suite, tmp_path):
    shutil.copytree(default_model_cache, paths.models_cache_dir(data_dir))  # skip the 20 s build here
    out = tmp_path / "out"
    result = dynadesk("eval", "--models", "default", "--suite", small_suite, "--no-identity-swap", "--no-robustness",
                      "--out", out, data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    doc = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert doc["models"][0]["name"].startswith("Hate speech R1")
    f = doc["results"]["m1"]["sets"]["suite"]
    assert f["n"] == 120 and 0.3 < f["accuracy"] <= 1.0  # a real model, better than chance on these rows
    check = doc["models"][0]["overlap"]["checks"][0]
    assert check["status"] == "unknown" and "labeled_data.csv" in check["message"]


def test_eval_has_help(data_dir):
    result = dynadesk("eval", "--help", data_dir=data_dir)
    assert result.returncode == 0 and "--suite" in result.stdout and "round:N" in result.stdout
