import pytest

from stratagem.cost import CostModel
from stratagem.errors import GraphError
from stratagem.ir import Graph, Op, TensorSpec, with_floating_dtype


def embedding_mlp():
    specs = [TensorSpec("ids", (4, 6), "int64", role="input", sample_dim=0),
             TensorSpec("table", (50, 8), role="weight"), TensorSpec("x", (4, 6, 8)),
             TensorSpec("w", (16, 8), role="weight"), TensorSpec("y", (4, 6, 16))]
    ops = [Op("emb", "embedding", ["ids", "table"], ["x"]), Op("fc", "linear", ["x", "w"], ["y"])]
    return Graph.build("emb", specs, ops, ["y"])


def test_floating_tensors_take_the_new_dtype_and_indices_keep_theirs():
    g = with_floating_dtype(embedding_mlp(), "bfloat16")
    assert {n: s.dtype for n, s in g.tensors.items()} == {
        "ids": "int64", "table": "bfloat16", "x": "bfloat16", "w": "bfloat16", "y": "bfloat16"}
    assert [op.name for op in g.ops] == ["emb", "fc"] and g.parameter_bytes == 2 * (50 * 8 + 16 * 8)


def test_an_op_in_bfloat16_does_the_same_flops_over_half_the_bytes():
    fp32, bf16 = embedding_mlp(), with_floating_dtype(embedding_mlp(), "bfloat16")
    m32, m16 = CostModel(fp32, "h100-1x8", num_devices=1), CostModel(bf16, "h100-1x8", num_devices=1)
    config = m32.configurations("fc")[0]
    w32, w16 = m32.op_work("fc", config), m16.op_work("fc", config)
    assert w32.flops == w16.flops == 2 * 4 * 6 * 8 * 16
    assert w32.num_bytes == 4 * (4 * 6 * 8 + 16 * 8 + 4 * 6 * 16) and w16.num_bytes == w32.num_bytes / 2
    assert w32.matrix and w16.dtype == "bfloat16" and w16.request.input_dtypes == ("bfloat16", "bfloat16")
    assert m16.op_cost("fc", config).forward_time_s < m32.op_cost("fc", config).forward_time_s


def test_an_integer_dtype_is_refused():
    with pytest.raises(GraphError, match="floating-point dtype"):
        with_floating_dtype(embedding_mlp(), "int32")
