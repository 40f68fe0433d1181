import pickle

import pytest

from stratagem.errors import GraphError
from stratagem.ir import Graph, Op, Role, TensorSpec, check_structure, format_graph


def mlp_specs():
    return [TensorSpec("x", (4, 8), role="input", sample_dim=0), TensorSpec("w1", (16, 8), role="weight"),
            TensorSpec("h", (4, 16)), TensorSpec("a", (4, 16)), TensorSpec("w2", (3, 16), role="weight"),
            TensorSpec("y", (4, 3))]


def mlp_ops():
    return [Op("fc2", "linear", ["a", "w2"], ["y"]), Op("act", "relu", ["h"], ["a"]),
            Op("fc1", "linear", ["x", "w1"], ["h"])]


def test_build_sorts_topologically_and_stably():
    g = Graph.build("mlp", mlp_specs(), mlp_ops(), ["y"])
    assert [op.name for op in g.ops] == ["fc1", "act", "fc2"]
    independent = [Op(f"r{i}", "relu", ["x"], [f"o{i}"]) for i in range(5)]
    specs = [TensorSpec("x", (2,), role="input")] + [TensorSpec(f"o{i}", (2,)) for i in range(5)]
    g2 = Graph.build("fan", specs, independent, ["o0"])
    assert [op.name for op in g2.ops] == [f"r{i}" for i in range(5)]


def test_a_graph_pickles_to_an_equal_one_whose_views_are_built_again():
    g = Graph.build("mlp", mlp_specs(), mlp_ops(), ["y"], {"zoo": "mlp"})
    assert g.producer["h"].name == "fc1"                     # a derived view, cached before pickling
    back = pickle.loads(pickle.dumps(g))
    assert back == g and [op.name for op in back.ops] == ["fc1", "act", "fc2"] and back.meta["zoo"] == "mlp"
    assert back.producer["h"] == g.op("fc1") and back.consumers["a"] == (g.op("fc2"),)
    with pytest.raises(TypeError):
        back.tensors["x"] = None


def test_num_parameters_and_requires_grad():
    g = Graph.build("mlp", mlp_specs(), mlp_ops(), ["y"])
    assert g.num_parameters == 16 * 8 + 3 * 16
    assert g.parameter_bytes == 4 * g.num_parameters
    assert g.requires_grad == {"w1", "w2", "h", "a", "y"}
    assert g.producer["a"].name == "act" and [o.name for o in g.consumers["x"]] == ["fc1"]


def test_cycle_is_rejected_with_the_ops_named():
    specs = [TensorSpec("a", (2,)), TensorSpec("b", (2,))]
    with pytest.raises(GraphError, match="cycle"):
        Graph.build("loop", specs, [Op("p", "relu", ["b"], ["a"]), Op("q", "relu", ["a"], ["b"])], ["a"])


@pytest.mark.parametrize("mutate, message", [
    (lambda s, o: (s + [TensorSpec("x", (1,))], o), "duplicate tensor"),
    (lambda s, o: (s, o + [Op("extra", "relu", ["y"], ["z"])]), "unknown tensor"),
    (lambda s, o: (s + [TensorSpec("z", (4, 3))], o + [Op("fc1", "relu", ["y"], ["z"])]), "duplicate op"),
    (lambda s, o: (s + [TensorSpec("z", (4, 3))], o + [Op("again", "relu", ["a"], ["y"])]), "produced twice"),
    (lambda s, o: (s + [TensorSpec("orphan", (2,))], o), "no producer"),
    (lambda s, o: ([TensorSpec("x", (4, 0), role="input")] + s[1:], o), "empty dim"),
])
def test_checker_rejects_broken_graphs(mutate, message):
    specs, ops = mutate(mlp_specs(), mlp_ops())
    with pytest.raises(GraphError, match=message):
        check_structure(Graph.build("bad", specs, ops, ["y"]))


def test_weight_produced_by_an_op_is_rejected():
    specs = mlp_specs()
    specs[1] = TensorSpec("w1", (16, 8), role=Role.WEIGHT)
    ops = mlp_ops() + [Op("make_w", "relu", ["x"], ["w1"])]
    with pytest.raises(GraphError):
        check_structure(Graph.build("bad", specs, ops, ["y"]))


def test_printer_names_every_op():
    text = format_graph(Graph.build("mlp", mlp_specs(), mlp_ops(), ["y"]))
    for name in ("linear(x, w1)", "relu(h)", "linear(a, w2)", "weight   w1[16,8]:float32"):
        assert name in text
