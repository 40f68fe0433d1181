"""The intermediate representation: tensors with roles, operators, graphs, and a checker."""

from stratagem.ir.attrs import Attrs
from stratagem.ir.check import check_structure
from stratagem.ir.dtypes import DTYPE_BYTES, dtype_bytes
from stratagem.ir.graph import Graph, Op, topological_order
from stratagem.ir.ownership import PARAMETER_ROLES, owned_parameters, weight_owner
from stratagem.ir.precision import PRECISIONS, check_precision, has_master_weights, with_floating_dtype, with_precision
from stratagem.ir.printer import format_graph
from stratagem.ir.serialize import graph_from_dict, graph_to_dict
from stratagem.ir.tensor import Role, TensorSpec

__all__ = ["Attrs", "DTYPE_BYTES", "Graph", "Op", "PARAMETER_ROLES", "Role", "TensorSpec", "check_structure", "with_floating_dtype", "PRECISIONS", "check_precision", "has_master_weights", "with_precision",
           "dtype_bytes", "format_graph", "graph_from_dict", "graph_to_dict", "owned_parameters",
           "topological_order", "weight_owner"]
