"""Grappler without its GPU passes, in the test workers and the children forked from their zygotes.

TensorFlow's Grappler rewrites every traced function before its first run, and the suite traces
thousands (each model's train, test and predict steps, tf.data's maps, the exports' signatures).
Three of its passes change nothing in these CPU graphs: the layout optimizer (NCHW for GPU
kernels), the memory optimizer (swapping and recomputation to fit GPU memory) and the MLIR graph
passes (`tfg_optimizer`: shape inference and attribute clean-up, done again, and a conversion of
the function library each time). The passes that do rewrite the graphs (pruning, constant folding,
arithmetic, dependencies, oneDNN's remapper) still run, once rather than twice: the second round
merged a few duplicate subgraphs. So the graphs compute what a user's do. Measured on the AVX2-only
EPYC (tests/README.md): test_refused_calls' Grappler time 11.0 -> 4.6 s
(`TF_CPP_VMODULE=meta_optimizer=1`), and test_refused_calls, test_encoders, test_layouts and
test_user_models under `pytest -n 2` 155 / 141 s -> 120 / 108 s.
"""

import os


def leave_out_gpu_passes():
    """Set before the first function runs (each thread reads its function options once); a no-op
    under another Keras backend."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
    from tensorflow.python.eager import context

    # The eager context's own config (private: TensorFlow's public options do not reach these
    # fields); every function call's options are made from it.
    config = config_pb2.ConfigProto()
    if context.context()._config is not None:
        config.CopyFrom(context.context()._config)
    rewrite = config.graph_options.rewrite_options
    rewrite.layout_optimizer = rewriter_config_pb2.RewriterConfig.OFF
    rewrite.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rewrite.disable_tfg_optimizer = True
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    context.context()._config = config
