"""Predicted all-reduce / all-gather times against PyTorch 2.13's NCCL model outputs.

    PYTHONPATH=. python benchmarks/collectives_vs_reference.py

The reference rows are docs/reference/hardware-and-collectives.md §3.6 (model outputs,
not measurements; that model assumes one NIC per node, our presets have one per GPU).
"""

from __future__ import annotations

from stratagem.cluster import load

MiB, GiB = 1 << 20, 1 << 30
REFERENCE = [  # cluster, ranks, bytes, all-reduce us, all-gather us
    ("a100-1x8", 8, MiB, 35.9, 21.3), ("a100-1x8", 8, 256 * MiB, 2013, 1011),
    ("a100-1x8", 8, GiB, 7885, 3947), ("a100-2x8", 16, GiB, 100_437, 50_222),
    ("h100-1x8", 8, 16 * MiB, 125, 70), ("h100-1x8", 8, GiB, 5135, 2572),
    ("h100-2x8", 16, GiB, 50_284, 25_146), ("h100-8x8", 64, 16 * MiB, 1190, 627),
    ("h100-8x8", 64, GiB, 25_686, 12_847),
]


def main() -> None:
    print(f"{'cluster':10} {'ranks':>5} {'size':>8}  {'AR ref us':>10} {'AR ours us':>10}  "
          f"{'AG ref us':>10} {'AG ours us':>10}  algorithm (ours)")
    for name, ranks, size, ar_ref, ag_ref in REFERENCE:
        cluster = load(name)
        ar = cluster.collective_estimate("all_reduce", size, [range(ranks)])
        ag = cluster.collective_estimate("all_gather", size, [range(ranks)])
        label = f"{size // GiB} GiB" if size >= GiB else f"{size // MiB} MiB"
        print(f"{name:10} {ranks:5} {label:>8}  {ar_ref:10,.1f} {ar.time_s * 1e6:10,.1f}  "
              f"{ag_ref:10,.1f} {ag.time_s * 1e6:10,.1f}  {ar.algorithm}/{ar.protocol}")


if __name__ == "__main__":
    main()
