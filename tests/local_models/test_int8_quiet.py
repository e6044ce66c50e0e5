"""The quantizer's noise is silenced without silencing the rest of the process."""

from __future__ import annotations

import logging

import pytest

from local_models.int8 import _quiet


def test_quiet_drops_root_and_onnxruntime_records_but_keeps_the_desks_loggers(caplog: pytest.LogCaptureFixture,
                                                                              capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    caplog.set_level(logging.INFO)
    with _quiet():
        logging.warning("quantizer chatter")
        logging.getLogger("onnxruntime.transformers.optimizer").warning("optimizer chatter")
        logging.getLogger("app.gui.somewhere").warning("the desk still speaks")
        print("printed while quantizing")
    logging.warning("root speaks again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["the desk still speaks", "root speaks again"]
    assert "printed while quantizing" in capsys.readouterr().out
    assert logging.getLogger().filters == []


def test_quiet_with_stdout_swallows_prints(capsys: pytest.CaptureFixture[str]) -> None:
    with _quiet(stdout=True):
        print("Collecting tensor data and making histogram ...")
    print("after")
    assert capsys.readouterr().out == "after\n"
