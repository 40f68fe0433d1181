"""The cost model: compute, communication, memory and re-scheduling of every configuration.

    model = CostModel(graph, cluster, optimizer="adam")
    model.op_cost(op_name, config)                                  -> OpCost
    model.edge_cost(tensor, src_op, src_config, dst_op, dst_config) -> EdgeCost
    model.plan_cost(strategy)                                       -> PlanCost

The planner core: this package does not import torch.
"""

from stratagem.cost.compute_table import ComputeTable, OpTiming, ProfileRequest
from stratagem.cost.costs import EdgeCost, OpCost, PlanCost, ReuseOption
from stratagem.space.tensor_layout import TensorLayout
from stratagem.cost.memory import MemoryCost, Optimizer
from stratagem.cost.model import CostModel, Edge
from stratagem.cost.redistribute import Redistribution
from stratagem.cost.steps import CommStep

__all__ = ["CommStep", "ComputeTable", "CostModel", "Edge", "EdgeCost", "MemoryCost", "OpCost",
           "OpTiming", "Optimizer", "PlanCost", "ProfileRequest", "Redistribution", "ReuseOption",
           "TensorLayout"]
