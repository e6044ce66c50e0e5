"""How the model's arithmetic rate compares with a large square matrix multiply on this machine (the design's
reference figure): a form's FLOPs per call divided by its time, as a share of the one-thread rate of a
2048x2048 multiply (torch fp32; onnxruntime's MatMulInteger for int8 forms).

This is a reference, not a bound. A text of 5-64 tokens multiplies matrices of 5-64 rows, which no kernel
runs at the square-matrix rate, so a share says little about what is left to gain (under load the base-size
model's exceeded 1 against an int8 rate measured at another moment). The bound is ``bench.matmul_floor``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

from bench.common import Result

GROUP = "models"
SIDE = 2048


def bert_flops(config: Mapping, tokens: int) -> float:
    """Multiply-adds x2 of one forward pass (embedding lookups excluded)."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    per_layer = 2 * tokens * (4 * h * h + 2 * h * inter) + 2 * 2 * tokens * tokens * h
    return layers * per_layer + 2 * h * h + 2 * h * config.get("num_labels", 2)


def square_rates(threads: int) -> dict[str, float]:
    """GOP/s of a 2048-square multiply on ``threads`` threads: "fp32" (torch), "int8" (MatMulInteger)."""
    import numpy as np
    import onnxruntime
    import torch
    from onnx import TensorProto, helper

    torch.set_num_threads(threads)
    a, b = torch.randn(SIDE, SIDE), torch.randn(SIDE, SIDE)
    weights = np.random.default_rng(0).integers(-127, 127, (SIDE, SIDE), dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "int8-matmul",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [SIDE, SIDE])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, [SIDE, SIDE])],
        initializer=[helper.make_tensor("B", TensorProto.INT8, [SIDE, SIDE], weights.tobytes(), raw=True)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                                           .SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).integers(0, 255, (SIDE, SIDE), dtype=np.uint8)
    return {"fp32": _rate(lambda: a @ b), "int8": _rate(lambda: session.run(None, {"A": x}))}


def _rate(fn: Callable[[], object]) -> float:
    for _ in range(3):
        fn()
    runs = []
    for _ in range(10):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return 2 * SIDE ** 3 / statistics.median(runs) / 1e9


def square_rate_rows(prefix: str, config: Mapping, token_counts: Sequence[int], samples: Mapping[str, list[float]],
                     rates: Mapping[str, float], int8_forms: set[str]) -> list[Result]:
    """Per form, the median over calls of (FLOPs of the call's token count / its time) / the square rate."""
    out = [Result(GROUP, f"{prefix}2048-square matmul rate, {kind}, one thread", "GOP/s", rate, None, 10,
                  notes="reference only: matmuls of 5-64 rows never run at this rate") for kind, rate in rates.items()]
    for form, measured in samples.items():
        kind = "int8" if form in int8_forms else "fp32"
        shares = [bert_flops(config, token_counts[k % len(token_counts)]) / (ms / 1000) / (rates[kind] * 1e9)
                  for k, ms in enumerate(measured)]
        out.append(Result(GROUP, f"{prefix}share of the square {kind} rate (reference, not a bound): {form}", "share",
                          statistics.median(shares), None, len(shares),
                          notes="model FLOPs per call / time / the 2048-square rate, median over calls; the matmul "
                                "floor rows bound the form, this does not"))
    return out
