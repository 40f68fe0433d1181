"""space.halo: the exchanges that bring a window op's irregular input regions from a regular layout,
checked against the regions the TDL analysis derives, and space.runnable's account of which
window splits run."""

from __future__ import annotations

import pytest

from stratagem.space import Configuration, Level, Shard, layout
from stratagem.space.halo import Halo, halo_exchange
from stratagem.space.regions import input_boxes
from stratagem.space.runnable import refusal
from stratagem.space.tensor_layout import TensorLayout, input_layout
from stratagem.tdl import analyze


def conv_analysis(size: int, kernel: int, stride: int, padding: int, dilation: int = 1):
    return analyze("conv2d", [2, 3, size, size], [4, 3, kernel, kernel], [4], stride=stride, padding=padding,
                   dilation=dilation)


def regions(analysis, config):
    op_layout = layout(analysis, config)
    lay = input_layout(op_layout, 0, False, input_boxes(analysis, config, 0))
    return lay, input_boxes(analysis, config, 0)


def test_a_padded_3x3_convolution_over_four_row_bands():
    analysis = conv_analysis(16, 3, 1, 1)
    lay, boxes = regions(analysis, Configuration((Level("h", 4),)))
    halo = halo_exchange(lay, boxes, (2, 3, 16, 16))
    assert isinstance(halo, Halo)
    assert halo.base.placements == (Shard(2),)
    (axis,) = halo.axes
    assert axis.owned == ((0, 4), (4, 8), (8, 12), (12, 16))
    assert axis.needed == ((0, 5), (3, 9), (7, 13), (11, 16))
    assert axis.pieces(1) == ((0, 3, 4), (1, 4, 8), (2, 8, 9))
    assert axis.sends(1) == ((0, 4, 5), (2, 7, 8))
    assert axis.sends(0) == ((1, 3, 4),) and axis.pieces(3) == ((2, 11, 12), (3, 12, 16))


CASES = [(size, kernel, stride, padding, dilation, levels)
         for size, kernel, stride, padding, dilation in [(16, 3, 1, 1, 1), (17, 5, 2, 2, 1), (24, 3, 1, 2, 2),
                                                          (12, 7, 1, 3, 1), (20, 3, 2, 0, 1)]
         for levels in [(("h", 2),), (("h", 4),), (("b", 2), ("h", 2)), (("h", 2), ("w", 2)), (("w", 3),)]]


@pytest.mark.parametrize("size,kernel,stride,padding,dilation,levels", CASES)
def test_exchanges_deliver_exactly_the_regions_the_analysis_derives(size, kernel, stride, padding, dilation, levels):
    """Each device's pieces, taken from the owners' chunks in order, tile its region along every
    halo dim; what one device sends is what the others take from it; elsewhere the region is the
    base layout's chunk or its leading rows."""
    analysis = conv_analysis(size, kernel, stride, padding, dilation)
    config = Configuration(tuple(Level(d, k) for d, k in levels))
    try:
        lay, boxes = regions(analysis, config)
    except Exception:
        pytest.skip("a split the analysis rejects")
    shape = (2, 3, size, size)
    halo = halo_exchange(lay, boxes, shape)
    assert isinstance(halo, Halo), halo
    by_dim = {a.dim: a for a in halo.axes}
    for device, box in enumerate(boxes):
        coords = halo.base.coordinates(device)
        chunk = halo.base.device_box(device, shape)
        for d in range(4):
            if d not in by_dim:
                assert box[d][0] == chunk[d][0] and box[d][1] <= chunk[d][1]
                continue
            axis = by_dim[d]
            me = coords[axis.axis]
            pieces = axis.pieces(me)
            assert (pieces[0][1], pieces[-1][2]) == box[d]
            assert all(a[2] == b[1] for a, b in zip(pieces, pieces[1:]))
            assert all(axis.owned[s][0] <= a < b <= axis.owned[s][1] for s, a, b in pieces)
            assert axis.owned[me] == chunk[d]
    for axis in halo.axes:
        given = sorted((s, d, a, b) for s in range(len(axis.owned)) for d, a, b in axis.sends(s))
        taken = sorted((s, d, a, b) for d in range(len(axis.needed)) for s, a, b in axis.pieces(d) if s != d)
        assert given == taken


def test_regions_that_are_no_halo_are_named():
    """Regions varying along two dims over one mesh axis (a diagonal split) are no halo of one
    dim, and regions leaving the tensor are refused; each with its reason."""
    lay = TensorLayout(0, (2,), (None,))
    diagonal = (((0, 2), (0, 5), (0, 4), (0, 4)), ((0, 2), (3, 8), (3, 8), (0, 4)))
    assert "differ along 2 dims" in halo_exchange(lay, diagonal, (2, 8, 8, 4))
    outside = (((0, 2), (0, 5)), ((0, 2), (3, 9)))
    assert "leave the tensor" in halo_exchange(lay, outside, (2, 8))


def test_which_window_splits_run():
    conv = conv_analysis(16, 3, 1, 1)
    assert refusal(conv, Configuration((Level("h", 2),)), 2) is None
    assert refusal(conv, Configuration((Level("b", 2), Level("w", 2))), 4) is None
    assert "kernel offsets" in refusal(conv, Configuration((Level("kh", 3),)), 3)
    counted = analyze("avg_pool2d", [2, 3, 16, 16], kernel_size=3, stride=1, padding=1, count_include_pad=False)
    assert "count_include_pad" in refusal(counted, Configuration((Level("h", 2),)), 2)
    plain = analyze("avg_pool2d", [2, 3, 16, 16], kernel_size=3, stride=1, padding=1)
    assert refusal(plain, Configuration((Level("h", 2),)), 2) is None


def test_only_window_inputs_take_halos():
    """An op without the window adapter whose split reads shifted regions (narrow: the kernel on a
    shard would narrow again) stays refused, though its regions are a halo of a regular layout."""
    narrow = analyze("narrow", [4, 12], dim=1, start=2, length=6)
    config = Configuration((Level("d1", 2),))
    lay, boxes = regions(narrow, config)
    assert isinstance(halo_exchange(lay, boxes, (4, 12)), Halo)
    assert "only a window's input" in refusal(narrow, config, 2)
