from stratagem.tdl.expr import Opaque, Sum, Max, where, exp, sqrt
from stratagem.tdl.trace import op
import numpy as np

@op(weights=("filters",))
def conv1d(data, filters):
    return lambda b, co, x: Sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])

Cholesky = Opaque("cholesky", impl=np.linalg.cholesky)

@op
def batch_cholesky(batch_mat):
    return lambda b, i, j: Cholesky(batch_mat[b, :, :])[i, j]

@op(weights=("w",))
def linear(x, w, bias=None):
    if bias is None:
        return lambda b, j: Sum(lambda k: x[b, k] * w[j, k])
    return lambda b, j: Sum(lambda k: x[b, k] * w[j, k]) + bias[j]

@op
def softmax(x):
    m = lambda b: Max(lambda c2: x[b, c2])
    return lambda b, c: exp(x[b, c] - m(b)) / Sum(lambda c3: exp(x[b, c3] - m(b)))

@op(weights=("table",))
def embedding(ids, table):
    return lambda b, d: Sum(lambda v: where(ids[b] == v, table[v, d], 0.0))

@op(shape=lambda x, *, shape: shape)
def merge(x, *, shape):
    D = x.shape[1]
    return lambda hd: x[hd // D, hd % D]

@op(shape=lambda a, b: (a.shape[0] + b.shape[0],))
def cat(a, b):
    A = a.shape[0]
    return lambda i: where(i < A, a[i], b[i - A])
