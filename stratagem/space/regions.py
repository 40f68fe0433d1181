"""What one device of a configuration computes and reads: its dim ranges and input regions.

Device e of a configuration computes, of each split dim, the chunk `Configuration.part(e, dim)`
(`assignment`); its input regions are the TDL analysis's worker share for those ranges
(`Analysis.share`). Under a split reduction dim only the first worker adds the non-reduced terms
(`first_in_reduction`). Used where placements cannot say it: irregular inputs (halos).
"""

from __future__ import annotations

from stratagem.space.tensor_layout import Box
from stratagem.space.config import Configuration


def assignment(analysis, config: Configuration, device: int) -> dict[str, tuple[int, int]]:
    ranges = {}
    for dim in config.degrees:
        index, count = config.part(device, dim)
        ranges[dim] = analysis.chunk(dim, count, index)
    return ranges


def first_in_reduction(analysis, config: Configuration, device: int) -> bool:
    return all(config.part(device, d.name)[0] == 0 for d in analysis.dims if d.is_reduction)


def input_boxes(analysis, config: Configuration, index: int) -> tuple[Box, ...]:
    """Per device of the configuration, the region of input `index` it reads (empty if none)."""
    rank = len(analysis.input_shapes[index])
    boxes = []
    for device in config.devices:
        share = analysis.share(assignment(analysis, config, device),
                               first_in_reduction(analysis, config, device))
        box = share.input_boxes[index]
        boxes.append(tuple(box) if box is not None else ((0, 0),) * rank)
    return tuple(boxes)
