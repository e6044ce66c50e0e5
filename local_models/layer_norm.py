"""SkipLayerNormalization nodes written back as Add (+ bias Add) + LayerNormalization.

    unfused = unfuse_skip_layer_norm(model)   # onnx ModelProto, rewritten in place; how many nodes

Why: onnxruntime's (1.32) CPU kernel for SkipLayerNormalization is several times slower than its Add and
LayerNormalization kernels on the same tensors (measured one thread, 31 x 768: 96 us against 18 us; 64 x 384:
97 against 17), so a fused graph spends more in its residual LayerNorms than the graph before fusion. The
rewrite computes the same sum and normalisation (float results within a few 1e-6), and onnxruntime's session
optimizer does not fuse the rewritten nodes back in the fused graphs (``tests``: the optimized graph has none).
An int8 recipe asks for it with ``plain_layer_norm``.
"""

from __future__ import annotations

from typing import Any

SKIP_LAYER_NORM = "SkipLayerNormalization"


def unfuse_skip_layer_norm(model: Any) -> int:
    """Replace every SkipLayerNormalization node of ``model``'s graph; returns how many there were."""
    from onnx import helper

    nodes, count = [], 0
    for node in model.graph.node:
        if node.op_type != SKIP_LAYER_NORM or node.domain != "com.microsoft":
            nodes.append(node)
            continue
        epsilon = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-12)
        x, skip, gamma, beta, bias = (list(node.input) + [""] * 5)[:5]
        outputs = list(node.output) + [""] * 4
        if outputs[1] or outputs[2]:  # mean and inverse std: LayerNormalization names them the same way
            raise ValueError(f"{node.name} outputs its mean or deviation; only the normalised sum is rewritten")
        total = f"{node.name}/sum"
        nodes.append(helper.make_node("Add", [x, skip], [total], name=f"{node.name}/add"))
        if bias:
            nodes.append(helper.make_node("Add", [total, bias], [f"{total}_bias"], name=f"{node.name}/add_bias"))
            total = f"{total}_bias"
        if outputs[3]:  # the sum itself, for the next layer's residual
            nodes.append(helper.make_node("Identity", [total], [outputs[3]], name=f"{node.name}/sum_out"))
        nodes.append(helper.make_node("LayerNormalization", [total, gamma] + ([beta] if beta else []), [outputs[0]],
                                      name=f"{node.name}/layer_norm", axis=-1, epsilon=epsilon))
        count += 1
    if count:
        if not any(o.domain in ("", "ai.onnx") and o.version >= 17 for o in model.opset_import):
            raise ValueError("LayerNormalization needs opset 17 or later; the graph imports an older one")
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return count
