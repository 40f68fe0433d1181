"""`stratagem frontier`: the table, the JSON file and the plot (TensorOpt Fig. 6)."""

from __future__ import annotations

import yaml

from stratagem.cli import main
from stratagem.cli.frontier import fastest_under
from stratagem.cluster import cluster_data
from stratagem.frontend import zoo
from stratagem.plan import Frontier
from stratagem.report.units import format_bytes, format_seconds
from stratagem.search import registry
from stratagem.search.context import context

from .images import assert_drawn


def test_the_frontier_its_file_and_its_plot(tmp_path, capsys):
    out_file, png = tmp_path / "front.json", tmp_path / "frontier.png"
    assert main(["frontier", "rnn-tiny", "--devices", "2", "-o", str(out_file), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    front = Frontier.load(out_file)
    assert len(front) >= 2 and f"{len(front)} plans on the frontier" in out
    memories = [p.additive_memory_bytes for p in front]
    times = [p.additive_time_s for p in front]
    assert memories == sorted(memories) and times == sorted(times, reverse=True)
    assert "fastest plan that fits" in out and f"plot written to {png}" in out
    assert_drawn(png, min_height=300, min_width=400)


def test_unknown_baselines_are_refused_before_any_work(capsys):
    assert main(["frontier", "rnn-tiny", "--baselines", "data-parallel,zero3"]) == 2
    err = capsys.readouterr().err
    assert "unknown baseline" in err and "zero3" in err and "data-parallel" in err


def test_the_fastest_plan_that_fits_fits_its_hosts_too(tmp_path):
    """A frontier point whose offloaded state overflows its nodes' host memory is not 'the fastest
    plan that fits', whatever the device memory cap."""
    data = cluster_data("a100-1x8")
    data["host"]["memory_bytes"] = 1024
    small = tmp_path / "small-hosts.yaml"
    small.write_text(yaml.safe_dump(data))
    ctx = context(zoo.build("mlp-tiny"), str(small), 2)
    cramped, sharded = registry.run(ctx, "fsdp", {"offload": True}), registry.run(ctx, "fsdp")
    assert fastest_under([cramped], float("inf")) == "none"
    assert fastest_under([cramped, sharded], float("inf")) == \
        f"{format_seconds(sharded.iteration_time_s)} at {format_bytes(sharded.peak_memory_bytes)} (simulated)"


def test_the_gap_to_a_certified_lower_bound(tmp_path, capsys):
    """--bound: FT's largest time gap to the relaxed problem's frontier, recorded in the file and
    printed; a gap below zero would mean the bound is none."""
    out_file = tmp_path / "front.json"
    assert main(["frontier", "rnn-tiny", "--devices", "2", "--bound", "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    found = Frontier.load(out_file).details["lower_bound"]
    assert 0.0 <= found["largest_time_gap"] < 1.0 and found["bound_points"] >= 1
    assert f"FT's frontier is within {found['largest_time_gap']:.1%} of a certified lower bound" in out
