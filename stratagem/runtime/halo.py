"""The halo exchange on torch.distributed (differentiable): each rank's chunk of an input in the
regular base layout becomes the region its op reads (space.halo).

    forward   along each irregular mesh axis in turn, over that axis's process group: every rank
              sends each other coordinate the rows of its chunk that coordinate needs and receives
              the rows it needs from theirs (point-to-point, all posted at once, so no order can
              deadlock); its region is the pieces in order along the dim
    backward  the same moves reversed: each received piece's gradient goes back to its owner,
              which adds it to the gradient of those rows of its chunk

Only halo rows move: a convolution split into row bands on k ranks sends (k - 1) * 2 halos, where
a redistribution through a replicated layout would move the whole tensor.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from stratagem.space.halo import Halo, HaloAxis


def with_halo(local: torch.Tensor, halo: Halo, mesh: DeviceMesh) -> torch.Tensor:
    """This rank's region of the input, from its chunk `local` of the base layout."""
    coordinates = mesh.get_coordinate()
    for axis in halo.axes:
        group = mesh.get_group(axis.axis)
        local = _Exchange.apply(local, axis, coordinates[axis.axis], group)
    return local


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local: torch.Tensor, axis: HaloAxis, me: int, group) -> torch.Tensor:
        ctx.axis, ctx.me, ctx.group, ctx.shape = axis, me, group, local.shape
        start = axis.owned[me][0]
        outgoing = {d: _rows(local, axis.dim, a - start, b - a) for d, a, b in axis.sends(me)}
        incoming = {s: _empty_rows(local, axis.dim, b - a) for s, a, b in axis.pieces(me) if s != me}
        _swap(outgoing, incoming, group)
        pieces = [incoming[s] if s != me else local.narrow(axis.dim, a - start, b - a)
                  for s, a, b in axis.pieces(me)]
        return pieces[0].clone() if len(pieces) == 1 else torch.cat(pieces, dim=axis.dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        axis, me, group = ctx.axis, ctx.me, ctx.group
        start, lo = axis.owned[me][0], axis.needed[me][0]
        outgoing = {s: _rows(grad, axis.dim, a - lo, b - a) for s, a, b in axis.pieces(me) if s != me}
        incoming = {d: _empty_rows(grad, axis.dim, b - a) for d, a, b in axis.sends(me)}
        _swap(outgoing, incoming, group)
        total = grad.new_zeros(ctx.shape)
        for s, a, b in axis.pieces(me):
            if s == me:
                total.narrow(axis.dim, a - start, b - a).add_(grad.narrow(axis.dim, a - lo, b - a))
        for d, a, b in axis.sends(me):
            total.narrow(axis.dim, a - start, b - a).add_(incoming[d])
        return total, None, None, None


def _rows(x: torch.Tensor, dim: int, start: int, length: int) -> torch.Tensor:
    return x.narrow(dim, start, length).contiguous()


def _empty_rows(like: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    shape = list(like.shape)
    shape[dim] = length
    return like.new_empty(shape)


def _swap(outgoing: dict[int, torch.Tensor], incoming: dict[int, torch.Tensor], group) -> None:
    """Send outgoing[c] to group rank c and receive incoming[c] from it, all at once."""
    ops = [dist.P2POp(dist.isend, t, dist.get_global_rank(group, c), group) for c, t in outgoing.items()]
    ops += [dist.P2POp(dist.irecv, t, dist.get_global_rank(group, c), group) for c, t in incoming.items()]
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()


__all__ = ["with_halo"]
