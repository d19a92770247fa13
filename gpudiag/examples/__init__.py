"""Small user-like programs shipped with gpudiag, for `make demo` and the docs.

They are written the way a user writes a training script (they do not import gpudiag);
`gpudiag run -- python -m gpudiag.examples.keras_mnist_like` diagnoses one;
input_bound_fit is `make demo`'s input-bound fit (its map waits on a read's latency) for
`gpudiag run` and `gpudiag try`.
"""
