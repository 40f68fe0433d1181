"""The fallback for ATen ops with no description: batch-sliced opaque (Tofu's batch_cholesky)."""

from __future__ import annotations

from stratagem.tdl.expr import Compute, Opaque
from stratagem.tdl.trace import op


@op(name="opaque", shape=lambda *xs, out_shape, **_: out_shape)
def opaque(*xs, target: str, out_shape: tuple, in_sample_dims: tuple, out_sample_dim=None,
           call=None):
    """An op TDL has no description for: split on the batch dim only, or replicate.

    `call` is how to run it (the recorded ATen call, see stratagem.frontend.calls); the TDL ignores it.
    """
    fn = Opaque(target, impl=None, result_shape=lambda *shapes: tuple(
        s for d, s in enumerate(out_shape) if d != out_sample_dim))
    names = [f"d{i}" for i in range(len(out_shape))]

    def body(*idx):
        batch = idx[out_sample_dim] if out_sample_dim is not None else None
        args = []
        for x, sd in zip(xs, in_sample_dims):
            index = [slice(None)] * x.ndim
            if batch is not None and sd is not None:
                index[sd] = batch
            args.append(x[tuple(index)])
        rest = [i for d, i in enumerate(idx) if d != out_sample_dim]
        return fn(*args)[tuple(rest)] if rest else fn(*args)[()]

    return Compute(names, body)
