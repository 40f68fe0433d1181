"""explain: per-op costs that add up to the plan's additive cost; the strategy picture."""

from __future__ import annotations

import matplotlib.image
import pytest

from stratagem.frontend import zoo
from stratagem.report import explain, picture
from stratagem.search import registry
from stratagem.search.context import context


def test_op_rows_add_up_to_the_plans_additive_time(tiny_ctx, tiny_frontier):
    for plan in (tiny_frontier.min_memory, tiny_frontier.min_time):
        rows = explain.explain(plan, tiny_ctx.model)
        assert [r.op for r in rows] == [op.name for op in plan.graph.ops]
        sums = explain.totals(rows)
        total = sums["compute_time_s"] + sums["sync_time_s"] + sums["reschedule_time_s"]
        assert total == pytest.approx(plan.additive_time_s, rel=1e-9)


def test_a_fresh_model_prices_the_plan_as_the_search_did(ft_plan, tiny_ctx):
    fresh = explain.explain(ft_plan)            # the plan's own cluster and devices, a new cost model
    assert [r.time_s for r in fresh] == pytest.approx([r.time_s for r in explain.explain(ft_plan, tiny_ctx.model)])


def test_sorting_and_the_table(ft_plan, tiny_ctx):
    rows = explain.explain(ft_plan, tiny_ctx.model)
    top = explain.sorted_rows(rows, "time", 3)
    assert len(top) == 3 and top[0].time_s == max(r.time_s for r in rows)
    table = explain.explain_table(top)
    assert table.columns[0] == "op" and len(table.rows) == 3 and table.rows[0][0] == top[0].op


def test_the_picture_marks_each_device_of_each_op(dp_plan, tiny_ctx, tmp_path):
    cells = picture.strategy_cells(dp_plan, tiny_ctx.model.analyses)
    assert {c.category for c in cells.values()} <= {"sample", "replicated", "whole", "reduction"}
    text = picture.picture_text(dp_plan, cells)
    assert "SS" in text and "S sample" in text.splitlines()[0]
    path = picture.write_picture_png(dp_plan, cells, tmp_path / "strategy.png")
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_categories_name_the_kinds_split(tiny_ctx):
    from stratagem.space import Configuration, Level
    op = next(o.name for o in tiny_ctx.graph.ops if o.kind == "linear")
    analysis = tiny_ctx.model.analyses[op]
    sample = next(d.name for d in analysis.dims if d.kind == "sample")
    assert picture.category(analysis, Configuration(())) == "whole"
    assert picture.category(analysis, Configuration((Level(sample, 2),))) == "sample"
    assert picture.category(analysis, Configuration((Level(None, 2),))) == "replicated"


def test_offloaded_ops_show_what_they_keep_in_host_memory():
    """fsdp with offload on 2 A100s: each op that offloads shows its host bytes, the additive
    per-device total of which is the plan's host memory; without offload no host column."""
    ctx = context(zoo.build("mlp-tiny"), "a100-1x8", 2)
    offloaded = registry.run(ctx, "fsdp", {"offload": True})
    rows = explain.explain(offloaded, ctx.model)
    held = [r for r in rows if r.host_bytes]
    assert held and all(offloaded.strategy[r.op].offloaded for r in held)
    assert sum(r.host_bytes for r in rows) == pytest.approx(offloaded.details["memory_by_kind"]["host"], rel=1e-12)
    assert "host/device" in explain.explain_table(rows).columns
    assert "host/device" not in explain.explain_table(explain.explain(registry.run(ctx, "fsdp"), ctx.model)).columns
