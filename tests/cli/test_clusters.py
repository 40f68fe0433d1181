"""`stratagem clusters` lists every preset, and describes one with collective times."""

from __future__ import annotations

from stratagem.cli import main


def test_lists_presets_with_bandwidths(capsys):
    assert main(["clusters"]) == 0
    out = capsys.readouterr().out
    for name in ("p100-4x4", "k80-16x4", "v100-2x8", "k80-1x8", "a100-Nx8", "h100-Nx8", "cpu-1xN"):
        assert name in out
    assert "119.6 GB/s" in out        # DGX-1V ring bus bandwidth: six NVLinks of 20 GB/s, less latency


def test_describes_one_cluster(capsys):
    assert main(["clusters", "h100-2x8"]) == 0
    out = capsys.readouterr().out
    assert "n0.d0->n0.nvswitch" in out and "all_reduce" in out and "cluster (16)" in out


def test_unknown_cluster_is_a_clear_error(capsys):
    assert main(["clusters", "tpu-9x9"]) == 2
    assert "no cluster preset 'tpu-9x9'" in capsys.readouterr().err
