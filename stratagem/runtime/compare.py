"""A distributed run against the single-process reference: the same training, within tolerance.

    max_rel_loss_diff    max over steps of |loss - reference| / |reference|
    max_rel_param_diff   max over parameters of max|p - reference| / max|reference| (per tensor, so
                         near-zero elements are judged at the tensor's scale), over elements whose
                         reference gradient never fell to rounding level (training.reference_run);
                         how many such noise elements were left out is reported beside it
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from stratagem.runtime.training import Reference

TOLERANCE = 1e-4


@dataclass(frozen=True)
class Comparison:
    max_rel_loss_diff: float
    max_rel_param_diff: float | None
    worst_parameter: str | None
    noise_elements: int

    @property
    def same_training(self) -> bool:
        params_ok = self.max_rel_param_diff is None or self.max_rel_param_diff <= TOLERANCE
        return self.max_rel_loss_diff <= TOLERANCE and params_ok

    def to_dict(self) -> dict:
        return {"max_rel_loss_diff": self.max_rel_loss_diff, "max_rel_param_diff": self.max_rel_param_diff,
                "worst_parameter": self.worst_parameter, "noise_elements_excluded": self.noise_elements,
                "tolerance": TOLERANCE, "same_training": self.same_training}


def compare(losses: Sequence[float], params: Mapping[str, torch.Tensor] | None, reference: Reference
            ) -> Comparison:
    loss_diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, reference.losses, strict=True))
    if params is None:
        return Comparison(loss_diff, None, None, 0)
    worst, worst_name, noise = 0.0, None, 0
    for name, want in reference.parameters.items():
        keep = ~reference.noise[name]
        noise += int((~keep).sum())
        if not keep.any():
            continue
        diff = ((params[name] - want).abs()[keep].max() / want.abs().max().clamp_min(1e-12)).item()
        if diff > worst:
            worst, worst_name = diff, name
    return Comparison(loss_diff, worst, worst_name, noise)
