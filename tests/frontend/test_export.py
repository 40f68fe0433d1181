"""frontend.export: the program capture reads, traced without each node's Python stack, and
torch's flag for that left as it was, also where the export fails."""

from __future__ import annotations

import pytest
import torch
import torch.fx.config as fx_config

from stratagem.frontend.export import ExportFailed, export_program


class Sine(torch.nn.Module):
    def forward(self, x):
        return x.sin() * 2


class DataDependent(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum().item() > 0 else x


@pytest.mark.parametrize("before", [False, True])
def test_nodes_carry_no_stack_and_the_flag_is_restored(before, monkeypatch):
    monkeypatch.setattr(fx_config, "do_not_emit_stack_traces", before)
    program = export_program(Sine(), (torch.randn(3),))
    assert [n.target for n in program.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.sin.default, torch.ops.aten.mul.Tensor]
    assert all(n.meta.get("stack_trace") is None for n in program.graph.nodes)
    assert fx_config.do_not_emit_stack_traces is before
    with pytest.raises(ExportFailed):
        export_program(DataDependent(), (torch.randn(3),))
    assert fx_config.do_not_emit_stack_traces is before
