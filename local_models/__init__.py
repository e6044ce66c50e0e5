"""Model back-ends, inference engine and attributions (Qt-free; never imports app or sync).

- ``engine``: ``load_engine`` -> ``InferenceEngine`` (predict, predict_batched, attribute),
  ``Ensemble``, ``ModelSpec``, ``model_sha256``.
- ``backends``: the registry and the Hugging Face (PyTorch) and ONNX back-ends.
- ``tokenization`` and ``words``: offsets into the exact text, truncation, words.
- ``attribution``: integrated gradients and word ablation, one score per word.
- ``export``: ONNX export, int8 quantization and the parity check.
- ``train`` and ``default_model``: training target models; the bundled round-1 model.
- ``errors``: ``ModelError`` and its kinds, each with a message for the user.

Heavy libraries (torch, onnxruntime, transformers) are imported when first needed, so
importing this package stays cheap.
"""
