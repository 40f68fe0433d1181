"""Configuration space: placements, per-op configurations, enumeration and restrictions."""

from stratagem.space.config import Configuration, Level, OpLayout, canonical_levels, layout
from stratagem.space.enumerate import (
    SpaceOptions, divisors, enumerate_configurations, ordered_factorizations,
)
from stratagem.space.placement import (
    REPLICATE, Partial, Placement, Replicate, Shard, format_placements, gradient_placement,
    parse_placement,
)
from stratagem.space.strategy import Edge, Strategy, as_strategy, check_reuse, check_strategy, reuse_of

__all__ = ["REPLICATE", "Configuration", "Edge", "Level", "Strategy", "as_strategy", "check_reuse", "reuse_of", "OpLayout", "Partial", "Placement", "Replicate",
           "Shard", "SpaceOptions", "canonical_levels", "check_strategy", "divisors", "enumerate_configurations",
           "format_placements", "gradient_placement", "layout", "ordered_factorizations",
           "parse_placement"]
