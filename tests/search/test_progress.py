"""Searches tell their progress (search.progress): each phase opened and closed in order, with the
count it promised and delivered: the cost tables per group and per edge, FT's eliminations per node
in every peak pass, the frontier points simulated, MCMC's proposals per chain, Tofu's steps; and no
one is told anything unless a caller gives a reporter."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stratagem.search.context import context
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.mcmc import MCMCOptions, mcmc
from stratagem.search.progress import SILENT, phase
from stratagem.search.space import build_search_space
from stratagem.search.tofu import factors, tofu
from tests.search.graphs import chain, fanout
from tests.search.recorder import Phase, Recorder


def watched(graph, devices: int, recorder: Recorder | None = None):
    return replace(context(graph, "v100-2x8", devices), progress=recorder or Recorder())


def test_ft_tells_the_cost_tables_every_pass_and_the_points_with_their_totals():
    ctx = watched(fanout(), 4)
    front = frontier(ctx)
    space = build_search_space(ctx.model, FTSearchOptions().searched_space)
    phases = ctx.progress.phases()
    assert phases[0] == Phase("cost tables: ops", len(space.groups), len(space.groups), len(space.groups))
    edges = len(ctx.model.edges())
    assert phases[1] == Phase("cost tables: edges", edges, edges, edges)
    passes = [p for p in phases if p.name.startswith("FT pass")]
    assert [p.name for p in passes] == [f"FT pass {i}: eliminations" for i in range(1, len(passes) + 1)]
    assert len(passes) == front.details["stats"]["passes"] > 1
    assert all(p.total == p.units == space.problem.num_nodes for p in passes)      # every node, once
    assert phases[-1] == Phase("simulating frontier points", len(front), len(front), len(front))


def test_mcmc_counts_each_chain_in_proposals_of_its_budget():
    ctx = watched(chain(3), 4)
    plan = mcmc(ctx, MCMCOptions(budget_s=None, max_proposals=30, seed=0))
    chains = [p for p in ctx.progress.phases() if p.name.startswith("MCMC chain")]
    assert [p.name.split(":")[0] for p in chains] == ["MCMC chain 1/3 from data-parallel", "MCMC chain 2/3 from expert",
                                                      "MCMC chain 3/3 from random 0"]
    assert [p.total for p in chains] == [30, 30, 30]
    assert [p.units for p in chains] == [c["proposals"] for c in plan.details["chains"]]


def test_tofu_counts_its_recursive_steps():
    ctx = watched(chain(3), 8)
    tofu(ctx)
    steps = [p for p in ctx.progress.phases() if p.name == "Tofu's recursive steps"]
    assert steps == [Phase("Tofu's recursive steps", len(factors(8)), 3, 3)]


def test_nobody_is_told_unless_a_reporter_is_given(capsys):
    ctx = context(chain(2), "v100-2x8", 2)
    assert ctx.progress is SILENT
    frontier(ctx)
    assert capsys.readouterr() == ("", "")


def test_a_phase_closes_however_its_block_ends():
    recorder = Recorder()
    with pytest.raises(KeyboardInterrupt):
        with phase(recorder, "outer", 2):
            with phase(recorder, "inner"):
                recorder.advance(3)
                raise KeyboardInterrupt
    assert recorder.phases() == [Phase("outer", 2, 0, 0), Phase("inner", None, 3, 1)]
