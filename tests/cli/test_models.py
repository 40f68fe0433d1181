"""`stratagem models`."""

from __future__ import annotations

import warnings

from stratagem.cli import main
from stratagem.frontend import zoo


def test_the_fast_listing_shows_counts_batches_and_sources(capsys):
    assert main(["models", "--no-capture", "gpt-7b", "alexnet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["model", "params", "published", "batch", "ops"]
    gpt, alexnet = lines[1].split(), lines[2].split()
    assert gpt[:5] == ["gpt-7b", "6.74B", "6.74B", "8", "-"] and "LLaMA" in lines[1]
    assert alexnet[:5] == ["alexnet", "61.10M", "61.10M", "256", "-"] and "FlexFlow" in lines[2]


def test_patterns_and_tiny_variants(capsys):
    assert main(["models", "--no-capture", "--tiny", "wresnet-152-*"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == [f"wresnet-152-{w}{t}" for w in (4, 6, 8, 10) for t in ("", "-tiny")]


def test_captured_listing_counts_the_graph_ops(capsys):
    assert main(["models", "lenet"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = zoo.build("lenet")
    assert row[:5] == ["lenet", "61.71K", "60.00K", "64", str(len(graph.ops))]


def test_an_unknown_model_is_an_error_naming_close_ones(capsys):
    assert main(["models", "--no-capture", "vgg-16"]) == 2
    err = capsys.readouterr().err
    assert "vgg16" in err and "stratagem models" in err
