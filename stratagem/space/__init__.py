"""Configuration space: placements, per-op configurations, enumeration and restrictions."""

from stratagem.space.config import Configuration, Level, OpLayout, canonical_levels, layout
from stratagem.space.enumerate import (
    SpaceOptions, divisors, enumerate_configurations, ordered_factorizations,
)
from stratagem.space.placement import (
    REPLICATE, Partial, Placement, Replicate, Shard, format_placements, gradient_placement,
    parse_placement,
)
from stratagem.space.pipeline import SCHEDULES, Pipeline, boundary_tensors, check_pipeline, stage_of, stage_ops
from stratagem.space.strategy import (
    Edge, Strategy, as_strategy, check_reuse, check_strategy, pipeline_of, reuse_of,
)

__all__ = ["SCHEDULES", "Pipeline", "boundary_tensors", "check_pipeline", "pipeline_of", "stage_of", "stage_ops",
           "REPLICATE", "Configuration", "Edge", "Level", "Strategy", "as_strategy", "check_reuse", "reuse_of", "OpLayout", "Partial", "Placement", "Replicate",
           "Shard", "SpaceOptions", "canonical_levels", "check_strategy", "divisors", "enumerate_configurations",
           "format_placements", "gradient_placement", "layout", "ordered_factorizations",
           "parse_placement"]
