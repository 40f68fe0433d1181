"""capture(): roles, names, shapes, dtypes, sample dims, saved tensors, warnings, folding."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stratagem.errors import StratagemError
from stratagem.frontend import OpaqueOpsWarning, capture
from stratagem.frontend.state import StateWriteError
from stratagem.ir import Role


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), labels)


def meta_inputs(*shapes_and_dtypes):
    return tuple(torch.empty(shape, dtype=dtype, device="meta") for shape, dtype in shapes_and_dtypes)


def no_conversion(node):
    """Keep every node opaque: these tests check capture's structure by the ATen targets."""
    return None


def capture_quietly(module, inputs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpsWarning)
        return capture(module, inputs, convert=no_conversion, **kwargs)


@pytest.fixture
def mlp_graph(checked):
    with torch.device("meta"):
        model = MLP()
    return checked(capture_quietly(model, meta_inputs(((5, 8), torch.float32), ((5,), torch.int64))))


def test_roles_names_shapes_and_dtypes(mlp_graph):
    g = mlp_graph
    assert {s.name for s in g.weights} == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert g.tensors["fc1.weight"].shape == (16, 8)
    assert g.num_parameters == 8 * 16 + 16 + 16 * 4 + 4
    assert g.inputs == ("x", "labels")
    assert g.tensors["labels"].dtype == "int64" and g.tensors["x"].dtype == "float32"
    assert all(g.tensors[t].role is Role.ACTIVATION for op in g.ops for t in op.outputs)


def test_graph_ends_in_the_scalar_loss(mlp_graph):
    (loss,) = mlp_graph.outputs
    assert mlp_graph.tensors[loss].shape == ()
    assert mlp_graph.producer[loss].attrs["target"] == "aten.cross_entropy_loss.default"


def test_inputs_get_sample_dim_zero_and_activations_inherit_the_batch(mlp_graph):
    g = mlp_graph
    assert g.tensors["x"].sample_dim == 0 and g.tensors["labels"].sample_dim == 0
    relu = next(op for op in g.ops if op.attrs.get("target") == "aten.relu.default")
    assert g.tensors[relu.outputs[0]].sample_dim == 0
    assert relu.attrs["out_sample_dim"] == 0 and relu.attrs["in_sample_dims"] == (0,)


def test_ops_record_their_module_path(mlp_graph):
    modules = {op.attrs["target"]: op.module for op in mlp_graph.ops}
    assert modules["aten.relu.default"] == ""
    assert {op.module for op in mlp_graph.ops if op.attrs["target"] == "aten.linear.default"} == {"fc1", "fc2"}


def test_saved_tensors_are_what_autograd_keeps(mlp_graph):
    g = mlp_graph
    fc1, fc2 = (op for op in g.ops if op.attrs["target"] == "aten.linear.default")
    relu = next(op for op in g.ops if op.attrs["target"] == "aten.relu.default")
    # x needs no grad, so fc1 keeps x (for its weight's grad) but not its weight
    assert set(fc1.saved) == {"x"}
    # relu's output needs grad: fc2 keeps it and its weight (weight.t() is a view of it)
    assert set(fc2.saved) == {relu.outputs[0], "fc2.weight"}
    assert relu.saved == relu.outputs


def test_internal_saved_bytes_are_recorded_per_op(mlp_graph):
    loss_op = mlp_graph.producer[mlp_graph.outputs[0]]
    internal = mlp_graph.meta["saved_internal_num_bytes"]
    assert internal[loss_op.name] >= 5 * 4 * 4   # cross-entropy keeps its log-softmax [5, 4] fp32


def test_one_warning_names_every_opaque_target():
    with torch.device("meta"):
        model = MLP()
    with pytest.warns(OpaqueOpsWarning) as record:
        capture(model, meta_inputs(((5, 8), torch.float32), ((5,), torch.int64)), convert=no_conversion)
    opaque = [w for w in record if issubclass(w.category, OpaqueOpsWarning)]
    assert len(opaque) == 1
    text = str(opaque[0].message)
    for target in ("aten.linear.default x2", "aten.relu.default x1", "aten.cross_entropy_loss.default x1"):
        assert target in text


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids)).sum()


def test_tied_weights_are_one_tensor(checked):
    with torch.device("meta"):
        model = Tied()
    g = checked(capture_quietly(model, meta_inputs(((3, 4), torch.int64))))
    assert [s.name for s in g.weights] == ["embed.weight"]
    assert g.num_parameters == 60
    head = next(op for op in g.ops if op.attrs["target"] == "aten.linear.default")
    assert "embed.weight" in head.inputs


class Norm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x).sum()


def test_buffers_are_buffers_and_their_updates_are_state(checked):
    with torch.device("meta"):
        model = Norm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpsWarning)
        g = checked(capture(model, meta_inputs(((6, 4), torch.float32))))
    assert {s.name for s in g.tensors_with_role(Role.BUFFER)} == {
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert sorted(g.meta["state_updates"]) == ["bn.num_batches_tracked", "bn.running_mean", "bn.running_var"]


def test_a_training_batch_norm_left_opaque_cannot_carry_its_statistics_and_is_refused():
    with torch.device("meta"):
        model = Norm()
    with pytest.raises(StateWriteError, match="writes buffer 'bn.running_mean'"):
        capture_quietly(model, meta_inputs(((6, 4), torch.float32)))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = c = x.new_zeros(x.shape[0], 5)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return (h * c).sum()


def test_tuple_outputs_become_one_op_per_used_element(checked):
    with torch.device("meta"):
        model = Recurrent()
    g = checked(capture_quietly(model, meta_inputs(((2, 3, 3), torch.float32))))
    cells = [op for op in g.ops if op.attrs.get("target") == "aten.lstm_cell.default"]
    assert len(cells) == 2 * 3
    assert sorted(op.attrs["call"]["output_index"] for op in cells) == [0, 0, 0, 1, 1, 1]
    assert all(g.tensors[op.outputs[0]].shape == (2, 5) for op in cells)
    # the saved tensors of a cell are charged once, to the op yielding h
    charged = [op for op in cells if op.saved]
    assert all(op.attrs["call"]["output_index"] == 0 for op in charged)


class Detached(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x.detach()) + self.fc(x).detach()).sum()


def test_detach_folds_only_where_no_gradient_flows(checked):
    with torch.device("meta"):
        model = Detached()
    g = checked(capture_quietly(model, meta_inputs(((2, 4), torch.float32))))
    detaches = [op for op in g.ops if op.attrs.get("target") == "aten.detach.default"]
    assert len(detaches) == 1   # x.detach() folds into x; fc(x).detach() stays
    assert g.producer[detaches[0].inputs[0]].attrs["target"] == "aten.linear.default"
    first_linear = next(op for op in g.ops if op.attrs.get("target") == "aten.linear.default")
    assert first_linear.inputs[0] == "x"


class Mixer(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(x, dim=0).sum() + F.softmax(x, dim=1).sum() + x.reshape(-1).sum()


def test_batch_split_is_refused_where_an_op_mixes_samples(checked):
    g = checked(capture_quietly(Mixer(), meta_inputs(((3, 4), torch.float32))))
    over_batch, over_features = (op for op in g.ops if op.attrs.get("target") == "aten.softmax.int")
    assert over_batch.attrs["out_sample_dim"] is None
    assert over_features.attrs["out_sample_dim"] == 0
    flat = next(op for op in g.ops if op.attrs.get("target") == "aten.reshape.default")
    assert flat.attrs["out_sample_dim"] is None   # [B*F] does not line up with the samples


class TwoInputs(nn.Module):
    def forward(self, seq_first: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return (seq_first.sum(0) @ table).sum()


def test_sample_dims_can_be_overridden_by_name_or_position(checked):
    inputs = meta_inputs(((7, 3, 4), torch.float32), ((4, 2), torch.float32))
    by_name = checked(capture_quietly(TwoInputs(), inputs, sample_dims={"seq_first": 1, "table": None}))
    by_position = checked(capture_quietly(TwoInputs(), inputs, sample_dims=[1, None]))
    for g in (by_name, by_position):
        assert g.tensors["seq_first"].sample_dim == 1 and g.tensors["table"].sample_dim is None
        summed = next(op for op in g.ops if op.attrs.get("target") == "aten.sum.dim_IntList")
        assert summed.attrs["out_sample_dim"] == 0   # [3, 4] keeps the batch as dim 0


def test_bad_sample_dims_say_what_was_expected():
    inputs = meta_inputs(((7, 3, 4), torch.float32), ((4, 2), torch.float32))
    with pytest.raises(StratagemError, match="names among"):
        capture_quietly(TwoInputs(), inputs, sample_dims={"nope": 0})
    with pytest.raises(StratagemError, match="one per tensor input"):
        capture_quietly(TwoInputs(), inputs, sample_dims=[0])
    with pytest.raises(StratagemError, match="out of range"):
        capture_quietly(TwoInputs(), inputs, sample_dims=[3, None])


def test_a_real_module_captures_too(checked):
    torch.manual_seed(0)
    g = checked(capture_quietly(MLP(), (torch.randn(5, 8), torch.randint(4, (5,)))))
    assert g.num_parameters == 8 * 16 + 16 + 16 * 4 + 4


def test_frozen_parameters_are_buffers_and_save_nothing_for_their_gradient(checked):
    with torch.device("meta"):
        model = MLP()
    model.fc2.requires_grad_(False)
    g = checked(capture_quietly(model, meta_inputs(((5, 8), torch.float32), ((5,), torch.int64))))
    assert {s.name for s in g.weights} == {"fc1.weight", "fc1.bias"}
    assert {s.name for s in g.tensors_with_role(Role.BUFFER)} == {"fc2.weight", "fc2.bias"}
    fc2 = [op for op in g.ops if op.attrs["target"] == "aten.linear.default"][1]
    assert "fc2.weight" in fc2.saved and fc2.inputs[0] not in fc2.saved   # only the input's grad needs it


class Nested(nn.Module):
    def forward(self, x: torch.Tensor, scale: int, pair: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return (x * scale + pair[0] - pair[1]).sum(1).mean()


def test_non_tensor_and_nested_inputs(checked):
    x = torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = checked(capture(Nested(), (x, 2, (x, torch.ones(3, 4))), convert=no_conversion))
    assert not [w for w in caught if "batch dims" in str(w.message)]
    assert g.inputs == ("x", "pair_0", "pair_1")
    summed = next(op for op in g.ops if op.attrs.get("target") == "aten.sum.dim_IntList")
    assert summed.attrs["out_sample_dim"] == 0


class Aliased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.alias(self.fc(x)).sum()


def test_alias_folds_even_where_gradients_flow(checked):
    with torch.device("meta"):
        model = Aliased()
    g = checked(capture_quietly(model, meta_inputs(((2, 4), torch.float32))))
    assert [op.attrs["target"] for op in g.ops] == ["aten.linear.default", "aten.sum.default"]
    assert g.ops[1].inputs == g.ops[0].outputs


class Lookup(nn.Module):
    def forward(self, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return rows[ids].sum()


def test_inputs_of_another_batch_size_are_read_whole(checked):
    g = checked(capture_quietly(Lookup(), meta_inputs(((5, 4), torch.float32), ((3,), torch.int64))))
    lookup = next(op for op in g.ops if op.attrs.get("target") == "aten.index.Tensor")
    assert lookup.attrs["out_sample_dim"] == 0          # [3, 4] follows the ids
    assert lookup.attrs["in_sample_dims"] == (None, 0)  # the 5 rows are read whole


def test_the_export_with_one_more_sample_in_a_worker_gives_the_graph_and_program_made_here(monkeypatch):
    from stratagem import forked
    from stratagem.frontend.batchdims import ProgramShapes, program_keys, program_shapes
    from stratagem.frontend.capture import capture_with_exports
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")
    inputs = (torch.randn(6, 8), torch.randint(0, 4, (6,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpsWarning)
        shared = capture_with_exports(MLP(), inputs, convert=no_conversion)
        monkeypatch.setenv(forked.CHILD_ENV, "1")           # as inside a worker: exported here
        here = capture_with_exports(MLP(), inputs, convert=no_conversion)
    assert isinstance(shared.grown, ProgramShapes) and not isinstance(here.grown, ProgramShapes)
    assert shared.graph == here.graph
    assert shared.grown == program_shapes(here.grown, with_keys=True)
    assert program_keys(shared.grown) == program_keys(here.grown)     # what rebatch.py matches against
    assert shared.graph.tensors["x"].sample_dim == 0 and any(
        t.sample_dim == 0 for t in shared.graph.tensors.values() if t.role is Role.ACTIVATION)
