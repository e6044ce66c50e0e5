"""`dynadesk models ...` and `dynadesk train` from the command line: readable output, clean failures."""

from __future__ import annotations

import json

from tests.cli_in_process import run_dynadesk


def dynadesk(*args, data_dir):
    return run_dynadesk("--data-dir", data_dir, *args)


def assert_clean_failure(result, message):
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert message in result.stderr


def test_register_list_and_export(data_dir, tiny_classifier_dir, tmp_path):
    result = dynadesk("models", "register", tiny_classifier_dir, "--task", "sentiment", data_dir=data_dir)
    assert_clean_failure(result, "--label-map")

    result = dynadesk("models", "register", tiny_classifier_dir, "--task", "hate_speech", "--name", "tiny",
                      data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "Registered tiny (hf-torch, sha256 " in result.stdout and "0 -> hate" in result.stdout

    out = tmp_path / "tiny-int8"
    result = dynadesk("models", "export-onnx", "tiny", "--int8", "--out", out, data_dir=data_dir)
    assert_clean_failure(result, "int8 refused: no task texts to check it on")
    assert not out.exists() and "Exporting" not in result.stdout + result.stderr  # refused before the export
    result = dynadesk("models", "export-onnx", "tiny", "--int8", "--force", "--out", out, data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "int8 parity: not measured (no task texts were given" in result.stdout and "--force" in result.stdout
    assert "Registered tiny (ONNX int8)" in result.stdout and (out / "model.onnx").is_file()

    result = dynadesk("models", "list", "--json", data_dir=data_dir)
    listed = {m["name"]: m for m in json.loads(result.stdout)}
    assert set(listed) == {"tiny", "tiny (ONNX int8)"}
    assert listed["tiny (ONNX int8)"]["task"] == "hate_speech" and listed["tiny (ONNX int8)"]["format"] == "onnx"
    assert listed["tiny (ONNX int8)"]["int8_parity"]["forced"] is True and listed["tiny"]["int8_parity"] is None
    latency = listed["tiny (ONNX int8)"]["latency"]  # measured when the form was built, stored with it
    assert latency["p95_ms"] >= latency["median_ms"] > 0 and latency["calls"] > 0 and listed["tiny"]["latency"] is None
    table = dynadesk("models", "list", data_dir=data_dir).stdout
    assert "int8 check" in table.splitlines()[0] and "int8, not checked" in table
    assert "latency (built)" in table.splitlines()[0] and f"p50 {latency['median_ms']:.2f} ms" in table

    result = dynadesk("models", "export-onnx", "no-such-model", data_dir=data_dir)
    assert_clean_failure(result, "neither a model folder nor one registered model")


def test_train_then_register(data_dir, trigger_csv, tiny_base_dir, tmp_path):
    out = tmp_path / "part"
    result = dynadesk("train", "--data", trigger_csv, "--text-column", "sentence", "--label-column", "kind",
                      "--label-map", "fruit=has fruit,plain=no fruit", "--base", tiny_base_dir, "--out", out,
                      "--epochs", "1", "--max-length", "32", "--threads", "1", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "Held-out test (60 texts): macro-F1" in result.stdout and "has fruit: precision" in result.stdout
    # 600 texts in all: too few to check an int8 form on, and the trained part records why
    assert "int8 form: none. int8 not used: only 600 task texts" in result.stdout
    assert json.loads((out / "int8_recipe.json").read_text())["recipe"] is None
    result = dynadesk("models", "register", out, data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "0 -> has fruit" in result.stdout
    listed = json.loads(dynadesk("models", "list", "--json", data_dir=data_dir).stdout)
    assert "only 600 task texts" in listed[0]["int8"]  # the record says why it has no int8 form

    result = dynadesk("train", "--data", trigger_csv, "--text-column", "text", "--label-column", "kind",
                      "--out", out, data_dir=data_dir)
    assert_clean_failure(result, "has no column 'text'; it has sentence, kind")
    result = dynadesk("train", "--data", trigger_csv, "--text-column", "sentence", "--label-column", "kind",
                      "--label-map", "fruit", "--out", out, data_dir=data_dir)
    assert result.returncode != 0 and "VALUE=LABEL" in result.stderr
