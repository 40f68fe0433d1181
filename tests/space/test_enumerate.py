import math

import pytest

from stratagem import tdl
from stratagem.space import (
    Configuration, Level, Partial, Replicate, Shard, SpaceOptions, enumerate_configurations, layout,
    ordered_factorizations, parse_placement,
)
from stratagem.tdl.trace import op


@op
def elementwise4(x):
    return lambda a, b, c, d: x[a, b, c, d] * 2.0


def test_tofu_count_4d_tensor_on_8_devices():
    """Tofu §5.2: a 4-D tensor split evenly across 8 devices has 20 layouts (degree vectors);
    with mesh-axis order distinguished and <= 3 axes: 4 + 2*4*3 + 4*3*3 = 64."""
    analysis = tdl.analyze(elementwise4, (8, 8, 8, 8))
    configs = enumerate_configurations(analysis, 8, SpaceOptions(allow_fewer_devices=False,
                                                                 allow_replicate=False))
    assert len(configs) == 64
    assert len({tuple(sorted(c.degrees.items())) for c in configs}) == 20


def labelled_compositions(exponent: int, labels: int, max_parts: int) -> int:
    """Ordered sequences of (label, 2^e) with adjacent labels distinct, exponents summing to e."""
    total = 0
    for parts in range(1, max_parts + 1):
        total += math.comb(exponent - 1, parts - 1) * labels * (labels - 1) ** (parts - 1)
    return total


@pytest.mark.parametrize("devices", [2, 4, 8, 16])
def test_linear_counts_with_sub_blocks_and_replication(devices):
    analysis = tdl.analyze("linear", (32, 32), (32, 32))     # dims b, j, k plus replication
    configs = enumerate_configurations(analysis, devices)
    e = int(math.log2(devices))
    expected = 1 * devices + sum(labelled_compositions(f, 4, 3) * (devices >> f) for f in range(1, e + 1))
    assert len(configs) == expected
    assert len(set(configs)) == len(configs)


def test_ordered_factorizations_of_12():
    assert set(ordered_factorizations(12, 2)) == {(12,), (2, 6), (6, 2), (3, 4), (4, 3)}
    assert all(math.prod(f) == 12 for f in ordered_factorizations(12, 3))


def test_canonical_form_merges_adjacent_axes_on_one_dim():
    assert Configuration((Level("b", 2), Level("b", 2))) == Configuration((Level("b", 4),))
    assert Configuration((Level("b", 2), Level("j", 2))) != Configuration((Level("j", 2), Level("b", 2)))
    assert str(Configuration.of(4, b=2, j=2)) == "b2xj2@4-7"


def test_coordinates_and_parts_are_row_major():
    c = Configuration.of(8, b=2, j=4)
    assert c.coordinates(13) == (1, 1)
    assert c.part(13, "b") == (1, 2) and c.part(13, "j") == (1, 4)
    nested = Configuration((Level("b", 2), Level("j", 2), Level("b", 2)))
    assert [nested.part(d, "b")[0] for d in range(8)] == [0, 1, 0, 1, 2, 3, 2, 3]


def test_misaligned_block_is_rejected():
    with pytest.raises(Exception, match="aligned"):
        Configuration.of(2, b=4)


def test_layout_of_linear_matches_megatron_rules():
    analysis = tdl.analyze("linear", (8, 6), (4, 6))
    column = layout(analysis, Configuration.of(j=2))
    assert column.inputs == ((Replicate(),), (Shard(0),)) and column.outputs == (Shard(1),)
    assert column.input_gradients == ((Partial("sum"),), (Shard(0),))
    row = layout(analysis, Configuration.of(k=2))
    assert row.inputs == ((Shard(1),), (Shard(1),)) and row.outputs == (Partial("sum"),)
    assert row.output_gradient == (Replicate(),)
    replicated = layout(analysis, Configuration.of(rep=2))
    assert replicated.input_gradients == ((Replicate(),), (Replicate(),))


def test_halo_split_is_irregular_and_in_the_space_by_default():
    """The papers' space has spatial splits (FlexFlow's attribute dims); `allow_irregular=False`
    leaves them out."""
    analysis = tdl.analyze("conv1d", (4, 4, 10), (4, 4, 3))
    assert not layout(analysis, Configuration.of(l=2)).is_regular
    default = enumerate_configurations(analysis, 4)
    assert any("l" in c.degrees for c in default)
    regular = enumerate_configurations(analysis, 4, SpaceOptions(allow_irregular=False))
    assert all("l" not in c.degrees for c in regular)
    assert len(default) > len(regular)


def test_placements_print_and_parse():
    for text in ("S(0)", "R", "P(sum)", "P(max)"):
        assert str(parse_placement(text)) == text
    with pytest.raises(Exception, match="expected S"):
        parse_placement("Shard0")
