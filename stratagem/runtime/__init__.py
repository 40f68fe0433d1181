"""Runtime: profiling, and executing plans on torch.distributed. Everything here but `runnable`,
`schedule` and `views` imports torch, so the names below load on first use.

    check_runnable(plan)        [(op, reason)] for ops the runtime cannot run (no torch)
    parallelize(module, plan)   the module as an nn.Module whose forward runs the plan (torchrun);
                                for a plan with pipeline stages, this rank's StageModule
    clip_grad_norm(params, m)   clip gradients to a global L2 norm across shards and meshes
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {"parallelize": "stratagem.runtime.execute", "PlanModule": "stratagem.runtime.execute",
         "check_runnable": "stratagem.runtime.runnable", "require_runnable": "stratagem.runtime.runnable",
         "Refusal": "stratagem.runtime.runnable", "clip_grad_norm": "stratagem.runtime.training",
         "StageModule": "stratagem.runtime.pipeline"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'stratagem.runtime' has no attribute {name!r}")


__all__ = sorted(_LAZY)
