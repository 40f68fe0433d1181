"""Save and resume training under another plan (TensorOpt §4: adapting to the resources available).

The model and optimizer state dicts (DTensors, by the original module's parameter names) go through
torch.distributed.checkpoint, which reshards on load: a checkpoint written by plan A on 4 ranks
loads into plan B's placements on 2 ranks. The step counter travels in the same checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save(model, optimizer, path: str | Path, step: int) -> None:
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state, "step": torch.tensor(step)},
             checkpoint_id=str(path))


def load(model, optimizer, path: str | Path) -> int:
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["step"])
