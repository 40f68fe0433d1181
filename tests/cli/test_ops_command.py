"""`stratagem ops`: the listing, one op in detail, and the ATen coverage report."""

from __future__ import annotations

import re

from stratagem.cli import main
from stratagem.tdl.library import LIBRARY


def run(capsys, *argv):
    code = main(["ops", *argv])
    return code, capsys.readouterr().out


def test_the_listing_has_one_line_per_op_with_derived_kinds(capsys):
    code, out = run(capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if "->" in line]
    assert len(lines) == len(LIBRARY) - 1                      # all but opaque, which has no example
    linear = next(line for line in lines if line.startswith("linear("))
    assert re.search(r"linear\(x\[B,K\], weight\[J,K\], bias\[J\]\) -> out\[B,J\]\s+"
                     r"b:sample  j:parameter  k:reduction->P\(sum\)", linear)
    conv = next(line for line in lines if line.startswith("conv2d("))
    assert "h:attribute[irregular]" in conv and "co:parameter " in conv and "kh:reduction->P(sum)" in conv
    lstm = next(line for line in lines if line.startswith("lstm_cell("))
    assert "w_ih[20,4]" in lstm and "j:parameter[no 2-way split]" in lstm


def test_one_op_shows_each_split_with_symbolic_and_concrete_regions(capsys):
    code, out = run(capsys, "linear")
    assert code == 0
    assert "split k 2 ways -> output P(sum)" in out
    assert re.search(r"x\s+\[\[0, B\), \[1/2\*K, K\)\]\s+= \[0:5, 3:7\]", out)
    assert re.search(r"bias\s+nothing\s+= nothing", out)


def test_an_unsplittable_dim_says_why(capsys):
    code, out = run(capsys, "adaptive_avg_pool2d")
    assert code == 0 and "split h 2 ways: not offered (size 1)" in out


def test_an_unknown_op_is_an_error_naming_it(capsys):
    assert main(["ops", "no_such_op"]) == 2
    assert "no operator 'no_such_op'" in capsys.readouterr().err


def test_coverage_counts_core_aten_ops_and_lists_the_rest(capsys):
    code, out = run(capsys, "--coverage", "-v")
    assert code == 0
    covered, total = map(int, re.search(r"described: (\d+) of (\d+)", out).groups())
    assert total > 150 and covered / total > 0.7
    listed = [line.strip() for line in out.splitlines() if line.startswith("  aten.")]
    assert len(listed) == total - covered and "aten.sort.default" in listed
