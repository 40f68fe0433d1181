"""The cost model: compute, communication, memory and re-scheduling of every configuration.

    model = CostModel(graph, cluster, optimizer="adam")
    model.op_cost(op_name, config)                                  -> OpCost
    model.op_work(op_name, config)                                  -> OpWork (FLOPs, bytes, request)
    model.edge_cost(tensor, src_op, src_config, dst_op, dst_config) -> EdgeCost
    model.edge_cost_in(edge, strategy)                              -> EdgeCost (its reuse choice)
    model.plan_cost(strategy)                                       -> PlanCost
    profile_requests(graph, ...), ComputeTable                      the measured op times it reads

The planner core: this package does not import torch.
"""

from stratagem.cost.compute_table import ComputeTable, OpTiming, ProfileRequest, RuntimeOverhead
from stratagem.cost.costs import EdgeCost, OpCost, PlanCost, ReuseOption
from stratagem.cost.memory import MemoryCost, Optimizer
from stratagem.cost.model import CostModel
from stratagem.cost.opcost import OpWork
from stratagem.cost.oplayouts import profile_requests
from stratagem.cost.redistribute import Redistribution
from stratagem.cost.steps import CommStep

__all__ = ["CommStep", "ComputeTable", "CostModel", "EdgeCost", "MemoryCost", "OpCost", "OpTiming", "OpWork",
           "Optimizer", "RuntimeOverhead", "PlanCost", "ProfileRequest", "Redistribution", "ReuseOption", "profile_requests"]
