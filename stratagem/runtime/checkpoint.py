"""Save and resume training under another plan (TensorOpt §4: adapting to the resources available).

The model and optimizer state dicts (DTensors, by the original module's parameter names) go through
torch.distributed.checkpoint, which reshards on load: a checkpoint written by plan A on 4 ranks
loads into plan B's placements on 2 ranks. The step counter travels in the same checkpoint.
`check` reads a checkpoint's metadata before anything launches: a missing, partial or mismatched
checkpoint is refused naming the file or the tensor and what differs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from stratagem.runtime.errors import ExecutionError
from stratagem.ir import Role


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


def check(path: str | Path, plan) -> int:
    """Before anything launches: the checkpoint at `path` is whole and fits `plan` (every weight of
    its graph, with the same shape; the plan's optimizer's state). Returns the step it was saved at.
    Errors name the file or the tensor and what differs."""
    from torch.distributed.checkpoint import FileSystemReader
    directory = Path(path)
    if not (directory / ".metadata").is_file():
        what = "no such directory" if not directory.exists() else "no .metadata file in it"
        raise CheckpointError(f"no checkpoint at {str(directory)!r}", got=what,
                              hint="Write one with `stratagem run PLAN --checkpoint-dir DIR`")
    try:
        metadata = FileSystemReader(str(directory)).read_metadata()
    except Exception as error:     # noqa: BLE001 - a corrupt file, whatever the unpickler raises
        raise CheckpointError(f"checkpoint {str(directory / '.metadata')!r} cannot be read",
                              got=f"{type(error).__name__}: {error}") from None
    _check_files(directory, metadata)
    _check_tensors(directory, metadata.state_dict_metadata, plan)
    return _saved_step(directory, metadata)


def _check_files(directory: Path, metadata) -> None:
    for name in sorted({info.relative_path for info in metadata.storage_data.values()}):
        if not (directory / name).is_file():
            raise CheckpointError(f"checkpoint {str(directory)!r} is partial", expected=f"its data file {name}",
                                  got="no such file", hint="Copy the whole checkpoint directory, or write it again")


def _check_tensors(directory: Path, saved, plan) -> None:
    expected = {f"model.{spec.name}": spec.shape for spec in plan.graph.tensors_with_role(Role.WEIGHT)}
    for key, shape in sorted(expected.items()):
        if key not in saved:
            raise CheckpointError(f"checkpoint {str(directory)!r} does not fit the plan",
                                  expected=f"weight {key[6:]!r} of {plan.model or plan.graph.name}",
                                  got="no such tensor in the checkpoint",
                                  hint="Resume with a plan of the model the checkpoint was written for")
        if tuple(saved[key].size) != tuple(shape):
            raise CheckpointError(f"checkpoint {str(directory)!r} does not fit the plan",
                                  expected=f"weight {key[6:]!r} of shape {list(shape)}",
                                  got=f"shape {list(saved[key].size)}")
    extra = sorted(k[6:] for k in saved if k.startswith("model.") and k not in expected)
    if extra:
        raise CheckpointError(f"checkpoint {str(directory)!r} does not fit the plan",
                              expected=f"the weights of {plan.model or plan.graph.name}",
                              got=f"{len(extra)} more, e.g. {extra[0]!r}")
    states = {k.rsplit(".", 1)[1] for k in saved if k.startswith("optim.state.")}
    wanted = OPTIMIZER_STATE_NAMES.get(plan.optimizer, set())
    if not wanted <= states:
        raise CheckpointError(f"checkpoint {str(directory)!r} holds another optimizer's state",
                              expected=f"{plan.optimizer}'s {sorted(wanted)}", got=str(sorted(states) or "none"))


def _saved_step(directory: Path, metadata) -> int:
    state = {"step": torch.tensor(0)}
    with warnings.catch_warnings():         # "torch.distributed is disabled ...": here on purpose
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, checkpoint_id=str(directory), no_dist=True)
    return int(state["step"])


OPTIMIZER_STATE_NAMES = {"adam": {"exp_avg", "exp_avg_sq"}, "adamw": {"exp_avg", "exp_avg_sq"},
                         "momentum": {"momentum_buffer"}, "sgd": set()}


class CheckpointError(ExecutionError):
    """A checkpoint that is missing, partial, or written for another model or optimizer."""
