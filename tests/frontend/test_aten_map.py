"""ATen -> TDL conversion, checked on graphs that torch.export produces from small real modules.

For every converted node, the library ops it becomes are traced at the node's input shapes (their
output shape must be the node's), then run with their torch implementations on the values the
exported graph computed, and compared with the node's own value: so each attribute mapping is
checked numerically, not only by name.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from stratagem.frontend.aten_map import Intermediate, convert, described_targets, target_name
from stratagem.frontend.torch_ops import TORCH_OPS
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.rounding import op_steps, unit_roundoff

pytestmark = pytest.mark.numerics     # run under every kernel path by scripts/numerics_variants.sh

# Nodes that are not computations: tuple access (capture reads `produces` instead) and export's
# dtype assertions (no tensor output).
NOT_COMPUTATIONS = {"<built-in function getitem>", "aten._assert_tensor_metadata.default"}


class Values(torch.fx.Interpreter):
    """Runs an exported graph on real tensors and keeps every node's value."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}

    def run_node(self, node):
        result = super().run_node(node)
        self.values[node] = _snapshot(result)       # in-place ops later mutate `result`
        return result


def _snapshot(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_snapshot(v) for v in value)
    return value


def exported(module: nn.Module, args: tuple):
    torch.manual_seed(0)
    program = torch.export.export(module, args, strict=False)
    state = {**program.state_dict, **program.constants}
    inputs, user = [], iter(args)
    for spec in program.graph_signature.input_specs:
        inputs.append(next(user) if spec.kind.name == "USER_INPUT" else state[spec.target])
    values = Values(program.graph_module)
    values.run(*inputs)
    return program, values.values


def run_chain(node, chain, values):
    """Trace and run the converted ops on the node's real inputs: the values they produce, and the
    chain's rounding steps (stratagem.tdl.rounding)."""
    results, produced, steps = [], {}, 0.0
    for op in chain:
        inputs = [results[i.index] if isinstance(i, Intermediate) else values[i] for i in op.inputs]
        opdef = LIBRARY[op.kind]
        desc = opdef.describe(*(tuple(t.shape) for t in inputs), **op.attrs)
        out = TORCH_OPS[op.kind](inputs, opdef.attrs_with_defaults(op.attrs), desc.output_shape)
        results.append(out[0] if isinstance(out, tuple) and desc.num_outputs == 1 else out)
        outs = out if isinstance(out, tuple) else (out,)
        assert tuple(outs[0].shape) == desc.output_shape, (op.kind, outs[0].shape, desc.output_shape)
        steps += op_steps(Analysis(desc), sum(o.numel() for o in outs))
        if op.produces is not None:
            produced.update((op.produces + k, o) for k, o in enumerate(outs))
    return produced, steps


def scale_of(node, values, expected) -> float:
    """The magnitude the node's arithmetic works at: its largest finite floating-point operand."""
    tensors = [values[a] for a in node.all_input_nodes if isinstance(values.get(a), torch.Tensor)] + [expected]
    finite = [t.detach()[t.isfinite()] for t in tensors if t.is_floating_point()]
    return max((t.abs().max().item() for t in finite if t.numel()), default=0.0)


def check_node(node, values, chain):
    """Each produced value equals the node's within the chain's rounding bound in the node's dtype:
    |got - want| <= 2 u steps (|want| + scale), scale the node's largest operand (a difference of
    near-equal operands is judged at their size, not at the result's)."""
    produced, steps = run_chain(node, chain, values)
    want = values[node]
    wants = dict(enumerate(want)) if isinstance(want, (tuple, list)) else {0: want}
    assert produced, f"{node.format_node()}: no op produces its value"
    for index, got in produced.items():
        expected = wants[index]
        assert tuple(got.shape) == tuple(expected.shape), node.format_node()
        if chain[-1].kind == "dropout" and chain[-1].attrs["train"]:
            x = values[node.args[0]]
            scaled = x / (1 - chain[-1].attrs["p"])
            assert bool(((got == 0) | torch.isclose(got, scaled)).all()), node.format_node()
            continue
        rtol = 2 * unit_roundoff(str(expected.dtype).removeprefix("torch.")) * steps
        torch.testing.assert_close(got.to(expected.dtype), expected, rtol=rtol,
                                   atol=rtol * scale_of(node, values, expected), equal_nan=True,
                                   msg=lambda m: f"{node.format_node()}: {m}")


def check_module(module, args, train=False):
    """Every computation node converts, and each conversion reproduces the node's value."""
    module.train(train)
    program, values = exported(module, args)
    kinds = set()
    for node in program.graph.nodes:
        if node.op != "call_function" or str(node.target) in NOT_COMPUTATIONS:
            continue
        chain = convert(node)
        assert chain is not None, f"no conversion for {node.format_node()}"
        check_node(node, values, chain)
        kinds.update(op.kind for op in chain)
    return kinds


# ---- small real models ------------------------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GPT(nn.Module):
    def __init__(self, vocab=50, d=16, t=8):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(t, d)
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d), nn.LayerNorm(d)
        self.fc, self.out, self.drop = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), nn.Dropout(0.1)
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        x = x + self.attn(self.ln1(x))
        x = x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Llama(nn.Module):
    def __init__(self, vocab=50, d=16, heads=4, kv_heads=2, t=8):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        hd = d // heads
        self.embed, self.norm, self.norm_f = nn.Embedding(vocab, d), RMSNorm(d), nn.RMSNorm(d)
        self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.k, self.v = nn.Linear(d, hd * kv_heads, bias=False), nn.Linear(d, hd * kv_heads, bias=False)
        self.gate, self.up, self.down = (nn.Linear(d, 24, bias=False), nn.Linear(d, 24, bias=False),
                                         nn.Linear(24, d, bias=False))
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(t).float(), inv)
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos())
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin())

    def forward(self, idx):
        x = self.embed(idx)
        b, t, c = x.shape
        hd = c // self.heads
        y = self.norm(x)
        q = self.q(y).view(b, t, self.heads, hd).transpose(1, 2)
        k = self.k(y).view(b, t, self.kv_heads, hd).transpose(1, 2)
        v = self.v(y).view(b, t, self.kv_heads, hd).transpose(1, 2)
        q, k = q * self.cos + rotate_half(q) * self.sin, k * self.cos + rotate_half(k) * self.sin
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + self.o(a)
        h = self.norm_f(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Bert(nn.Module):
    def __init__(self, vocab=50, d=16, heads=4):
        super().__init__()
        self.tok, self.typ = nn.Embedding(vocab, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.enc = nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0, batch_first=True)
        self.pool = nn.Linear(d, d)

    def forward(self, idx, mask):
        x = self.ln(self.tok(idx) + self.typ(torch.zeros_like(idx)))
        extended = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
        x = self.enc(x) + extended.sum() * 0.0
        return torch.tanh(self.pool(x[:, 0]))


class T5Attention(nn.Module):
    def __init__(self, d=16, heads=4, buckets=8):
        super().__init__()
        self.heads, self.norm = heads, RMSNorm(d)
        self.q, self.bias = nn.Linear(d, d, bias=False), nn.Embedding(buckets, heads)

    def forward(self, x):
        b, t, c = x.shape
        q = self.q(self.norm(x)).view(b, t, self.heads, c // self.heads).permute(0, 2, 1, 3)
        scores = torch.matmul(q, q.transpose(-1, -2))
        relative = torch.arange(t)[:, None] - torch.arange(t)[None, :]
        bias = self.bias(relative.abs().clamp(max=7)).permute(2, 0, 1).unsqueeze(0)
        weights = F.dropout(F.softmax(scores + bias, dim=-1), 0.1, training=self.training)
        return torch.matmul(weights, q).mean(1)


class ResNetStem(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, c, 7, 2, 3, bias=False), nn.BatchNorm2d(c)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.conv2, self.bn2 = nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * c)
        self.down = nn.Conv2d(c, 2 * c, 1, 2, bias=False)
        self.fc = nn.Linear(2 * c, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        y = F.relu(self.bn2(self.conv2(x)) + self.down(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, (1, 1)), 1))


class VGG(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
                                      nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Linear(32, 16), nn.ReLU(True), nn.Dropout(), nn.Linear(16, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class AlexNetStem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(3, 4, 11, 4, 2), nn.MaxPool2d(3, 2)

    def forward(self, x):
        return self.pool(F.relu(self.conv(x)))


class InceptionBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1, self.b2 = nn.Conv2d(4, 2, 1), nn.Conv2d(4, 2, (1, 3), padding=(0, 1))
        self.b3, self.bn = nn.Conv2d(4, 2, (3, 1), padding=(1, 0)), nn.BatchNorm2d(2, eps=0.001)

    def forward(self, x):
        pooled = F.avg_pool2d(x, 3, 1, 1)
        return torch.cat([self.b1(x), self.b2(x), F.relu(self.bn(self.b3(x))), pooled], 1)


class UnrolledLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell, self.fc = nn.LSTMCell(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        h, c = torch.zeros(x.shape[1], 6), torch.zeros(x.shape[1], 6)
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
        return self.fc(h)


def _tokens(*shape, high=50):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(1))


def _normal(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2))


MODELS = {
    "gpt": (GPT, lambda: (_tokens(2, 8), _tokens(2, 8))),
    "llama": (Llama, lambda: (_tokens(2, 8),)),
    "bert": (Bert, lambda: (_tokens(2, 8), torch.ones(2, 8, dtype=torch.long))),
    "t5": (T5Attention, lambda: (_normal(2, 8, 16),)),
    "resnet": (ResNetStem, lambda: (_normal(2, 3, 32, 32),)),
    "vgg": (VGG, lambda: (_normal(2, 3, 16, 16),)),
    "alexnet": (AlexNetStem, lambda: (_normal(2, 3, 63, 63),)),
    "inception": (InceptionBlock, lambda: (_normal(2, 4, 8, 8),)),
    "lstm": (UnrolledLSTM, lambda: (_normal(3, 2, 4),)),
}

EXPECTED_KINDS = {
    "gpt": {"embedding", "arange", "layer_norm", "linear", "slice", "reshape", "transpose",
            "scaled_dot_product_attention", "gelu", "cross_entropy", "dropout"},
    "llama": {"embedding", "rms_norm", "pow_scalar", "mean", "rsqrt", "cat", "neg",
              "repeat_interleave", "silu", "scaled_dot_product_attention"},
    "bert": {"zeros_like", "unsqueeze", "to_copy", "rsub_scalar", "select", "relu", "tanh"},
    "t5": {"matmul", "permute", "abs", "clamp", "softmax", "arange", "sub"},
    "resnet": {"conv2d", "batch_norm_stats", "batch_norm_apply", "max_pool2d", "adaptive_avg_pool2d",
               "flatten", "relu"},
    "vgg": {"conv2d", "max_pool2d", "adaptive_avg_pool2d", "dropout"},
    "alexnet": {"conv2d", "max_pool2d"},
    "inception": {"avg_pool2d", "conv2d", "cat", "batch_norm_stats", "batch_norm_apply"},
    "lstm": {"lstm_cell", "zeros", "select", "linear"},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_node_of_a_training_graph_converts_and_reproduces_its_value(name):
    make, args = MODELS[name]
    kinds = check_module(make(), args(), train=True)
    assert EXPECTED_KINDS[name] <= kinds, EXPECTED_KINDS[name] - kinds


@pytest.mark.parametrize("name", ["resnet", "inception", "gpt"])
def test_inference_graphs_convert_too(name):
    make, args = MODELS[name]
    kinds = check_module(make(), args(), train=False)
    if name != "gpt":
        assert "batch_norm" in kinds and "batch_norm_stats" not in kinds


# ---- one ATen op (or a few) at a time ---------------------------------------------------------

class Fn(nn.Module):
    def __init__(self, fn, params=()):
        super().__init__()
        self.fn = fn
        self.params = nn.ParameterList([nn.Parameter(p) for p in params])

    def forward(self, *args):
        return self.fn(*args, *self.params)


X = _normal(3, 4, 5)
IMG = _normal(2, 4, 6, 6)
POS = X.abs() + 0.5
UNIT = torch.rand(3, 4, 5, generator=torch.Generator().manual_seed(3)) * 1.8 - 0.9
MASK = X > 0

FUNCTIONS = [
    # elementwise
    ("unary_math", lambda x: torch.exp(x) + torch.sin(x) * torch.cos(x) - torch.tanh(x) + torch.erf(x)
     + torch.expm1(x) + torch.sinh(x) + torch.cosh(x) + torch.atan(x) + torch.asinh(x) + torch.tan(x), (UNIT,),
     {"exp", "sin", "cos", "tanh", "erf", "expm1", "sinh", "cosh", "atan", "asinh", "tan"}),
    ("positive_math", lambda x: torch.log(x) + torch.sqrt(x) + torch.rsqrt(x) + torch.log2(x)
     + torch.log10(x) + torch.log1p(x) + torch.reciprocal(x) + torch.acosh(x + 1), (POS,),
     {"log", "sqrt", "rsqrt", "log2", "log10", "log1p", "reciprocal", "acosh"}),
    ("unit_math", lambda x: torch.asin(x) + torch.acos(x) + torch.atanh(x), (UNIT,), {"asin", "acos", "atanh"}),
    ("rounding", lambda x: torch.floor(x) + torch.ceil(x) + torch.round(x) + torch.trunc(x) + torch.sign(x)
     + torch.abs(x) + torch.neg(x), (X * 3,), {"floor", "ceil", "round", "trunc", "sign", "abs", "neg"}),
    ("activations", lambda x: F.elu(x, 0.5) + F.leaky_relu(x, 0.2) + F.hardtanh(x, -0.5, 0.5) + F.relu6(x)
     + F.softplus(x, 2.0, 3.0) + F.mish(x) + F.hardswish(x) + F.hardsigmoid(x) + F.gelu(x) + torch.sigmoid(x),
     (X,), {"elu", "leaky_relu", "hardtanh", "softplus", "mish", "hardswish", "hardsigmoid", "gelu", "sigmoid"}),
    ("binary", lambda x, y: torch.maximum(x, y) + torch.minimum(x, y) + torch.atan2(x, y) + x ** y.abs()
     + torch.fmod(x, y) + torch.remainder(x, y) + torch.div(x, y, rounding_mode="floor")
     + torch.div(x, y, rounding_mode="trunc") + (x - y * 2) / y, (X, POS[0]),
     {"maximum", "minimum", "atan2", "pow", "fmod", "remainder", "div", "sub", "mul_scalar"}),
    ("scalars", lambda x: (x + 2) * 3 - 1.5 + 2 ** x + (1 - x) + x / 4 + torch.fmod(x, 0.7)
     + torch.remainder(x, 0.7) + x.pow(3) + torch.div(x, 2, rounding_mode="floor"), (X,),
     {"add_scalar", "mul_scalar", "sub_scalar", "rpow_scalar", "rsub_scalar", "div_scalar", "fmod_scalar",
      "remainder_scalar", "pow_scalar"}),
    ("compare", lambda x, y: ((x > y) & (x >= 0)) | ((x < 0.5) ^ (x <= y)) | (x == y) | (x != 0.25)
     | torch.logical_not(x > 0) | ~(y < 0), (X, POS[0] - 1),
     {"gt", "ge_scalar", "lt_scalar", "le", "eq", "ne_scalar", "logical_and", "logical_or", "logical_xor",
      "logical_not"}),
    ("logical", lambda x, y: torch.logical_and(x, y) + torch.logical_or(x, y) + torch.logical_xor(x, y),
     (X, POS[0] - 1), {"logical_and", "logical_or", "logical_xor"}),
    ("select_values", lambda x, m: torch.where(m, x, -x) + x.masked_fill(m, -1.0)
     + torch.clamp(x, min=x[0], max=x[1] + 1) + torch.clamp(x, max=x[1]) + x.clamp(-0.5, 0.5)
     + torch.isnan(x) + torch.isinf(x), (X, MASK),
     {"where", "masked_fill", "clamp_tensor", "minimum", "clamp", "isnan", "isinf"}),
    ("scalar_choices", lambda x, m: torch.where(m, x, 0.5) + torch.min(x, x * 2) + torch.max(x, -x), (X, MASK),
     {"logical_not", "masked_fill", "minimum", "maximum"}),
    ("casts", lambda x: x.to(torch.int64) + x.to(torch.bool) + x.double().float(), (X * 3,), {"to_copy"}),
    # matrix products
    ("matmuls", lambda x, y, b: torch.mm(x[0], y) + torch.bmm(x, y.expand(3, 5, 4)).sum(0)
     + torch.addmm(b, x[0], y, beta=0.5, alpha=2.0) + torch.baddbmm(b, x, y.expand(3, 5, 4)).mean(0)
     + x[0] @ y + F.linear(x[0], y.t(), b), (X, _normal(5, 4), _normal(4)),
     {"mm", "bmm", "addmm", "baddbmm", "expand", "transpose", "linear", "matmul"}),
    # convolution and pooling
    ("conv1d_pool1d", lambda x, w, b: F.avg_pool1d(F.max_pool1d(F.conv1d(x, w, b, padding=1), 2), 2, 1,
                                                   1, count_include_pad=False) + F.adaptive_avg_pool1d(x, 1).sum(),
     (X, _normal(6, 4, 3), _normal(6)), {"conv1d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d"}),
    ("conv2d_options", lambda x, w, g: F.conv2d(x, w, stride=2, dilation=2, padding=2)
     + F.conv2d(x, g, groups=2, padding="same")[:, :, ::2, ::2], (IMG, _normal(4, 4, 3, 3), _normal(4, 2, 3, 3)),
     {"conv2d", "slice"}),
    ("pool2d", lambda x: F.avg_pool2d(x, 2, divisor_override=3) + F.max_pool2d(x, 2, ceil_mode=True)[..., :3, :3]
     + F.interpolate(x[..., :3, :3], scale_factor=2, mode="nearest")[..., :3, :3], (IMG,),
     {"avg_pool2d", "max_pool2d", "upsample_nearest2d"}),
    # normalization
    ("norms", lambda x, w: F.group_norm(x, 2, w, w) + F.layer_norm(x, (6, 6)) + F.rms_norm(x, (6,))
     + F.batch_norm(x, torch.zeros(4), torch.ones(4), w, w, training=False), (IMG, _normal(4)),
     {"group_norm", "layer_norm", "rms_norm", "batch_norm"}),
    # reductions
    ("reductions", lambda x: x.sum() + x.mean((0, 2)).sum() + x.amax(1).sum() + x.amin(-1, keepdim=True).sum()
     + x.prod(1).sum() + x.var(1).sum() + x.std((0, 1), correction=0).sum() + torch.logsumexp(x, 2).sum()
     + x.argmax(1).sum() + x.argmin().float() + x.max(2)[0].sum() + x.min(0).values.sum()
     + x.cumsum(1).sum() + (x > 0).any(1).sum() + (x > -3).all() + x.max() + x.min(), (X,),
     {"sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp", "argmax", "argmin", "max_dim",
      "min_dim", "cumsum", "any", "all"}),
    ("softmaxes", lambda x: F.softmax(x, 1) + F.log_softmax(x, -1), (X,), {"softmax", "log_softmax"}),
    # nn
    ("attention_masks", lambda q, k, m, b: F.scaled_dot_product_attention(q, k, k, attn_mask=m)
     + F.scaled_dot_product_attention(q, k, k, attn_mask=b, scale=0.5)
     + F.scaled_dot_product_attention(q, k[:, :2], k[:, :2], enable_gqa=True),
     (_normal(2, 4, 5, 3), _normal(2, 4, 5, 3), torch.tril(torch.ones(5, 5, dtype=torch.bool)), _normal(5, 5)),
     {"scaled_dot_product_attention", "slice"}),
    ("losses", lambda x, t, w: F.nll_loss(F.log_softmax(x, 1), t, w, ignore_index=1)
     + F.cross_entropy(x, t, label_smoothing=0.1, reduction="sum") + F.mse_loss(x, x.flip(0))
     + F.cross_entropy(x, t, reduction="none").sum(), (_normal(6, 4), _tokens(6, high=4), _normal(4).abs()),
     {"nll_loss", "cross_entropy", "mse_loss", "flip"}),
    # shapes, joins, gathers
    ("shapes", lambda x: x.view(3, -1).reshape(-1, 4, 5).flatten(1).unflatten(1, (4, -1)).unsqueeze(0)
     .squeeze(0).permute(2, 0, 1).transpose(0, 1).contiguous().clone().expand(2, 3, 5, 4)[1]
     .squeeze(), (X,), {"reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "permute", "transpose",
                        "contiguous", "clone", "expand", "select"}),
    ("joins", lambda x: torch.stack([x, x * 2], 1).sum(1) + torch.cat(x.chunk(2, dim=2), 2)
     + torch.cat(x.split([1, 3], dim=1), 1) + torch.stack(x.unbind(0), 0) + x.narrow(1, 0, 4), (X,),
     {"stack", "cat", "slice", "select", "narrow"}),
    ("rearrange", lambda x: (F.pad(x, (1, 2), value=0.5), torch.triu(x, 1), torch.tril(x, -1), x.flip(1),
                             x.roll(2, 2), x.repeat(1, 2, 1), x.repeat_interleave(2, dim=0)), (X,),
     {"pad", "triu", "tril", "flip", "roll", "repeat", "repeat_interleave"}),
    ("gathers", lambda x, i, j: (torch.gather(x, 2, j), x[:, i], torch.index_select(x, 0, i[1:])),
     (X, torch.tensor([3, 0, 1]), _tokens(3, 4, 2, high=5)),
     {"gather", "index_select"}),
    ("edges_and_views", lambda x: (F.pad(x, (2, 1), mode="reflect"), F.pad(x, (1, 3), mode="replicate"),
                                         F.pad(x[None], (1, 1, 2, 0), mode="reflect"), torch.diagonal(x, 1, 1, 2),
                                         x.contiguous().as_strided((2, 3), (5, 1), 4)),
     (X,), {"reflection_pad", "replication_pad", "diagonal", "as_strided"}),
    ("scatters", lambda x, i, s: (torch.scatter_add(x, 2, i, s), torch.slice_scatter(x, s, 2, 1, 3),
                                  torch.select_scatter(x, x[:, 1], 1, 2)),
     (X, _tokens(3, 4, 2, high=5), _normal(3, 4, 2)), {"scatter_add", "slice_scatter", "select_scatter"}),
    ("pool3d", lambda x: (F.max_pool3d(x, 2), F.avg_pool3d(x, 2, 1, 1, count_include_pad=False),
                          F.adaptive_avg_pool3d(x, (1, 2, 2))), (_normal(2, 3, 4, 4, 6),),
     {"max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"}),
    ("in_place_fills", lambda x, m: (x.clone().fill_(2.5), torch.zeros(3, 4, 5).copy_(x[0]),
                                     m & True, m | False, m ^ True), (X, MASK),
     {"full_like", "expand", "clone", "logical_not"}),
    ("creation", lambda x: x + torch.zeros(3, 4, 5) + torch.ones(5) + torch.full((4, 5), 2.0)
     + torch.zeros_like(x) + torch.ones_like(x) + torch.full_like(x, 3.0) + x.new_zeros(5)
     + torch.arange(5) + torch.arange(1, 6) + torch.arange(0, 10, 2) + torch.tensor(1.5), (X,),
     {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange"}),
]


@pytest.mark.parametrize("case", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_aten_ops_convert_to_the_library_ops_that_compute_them(case):
    _, fn, args, expected = case
    kinds = check_module(Fn(fn), args)
    assert expected <= kinds, expected - kinds


def test_unknown_ops_and_undescribed_arguments_give_none():
    program, _ = exported(Fn(lambda x: (torch.sort(x, 1)[0], torch.topk(x, 2, 1)[0],
                                        F.conv_transpose1d(x, torch.ones(4, 2, 3)))), (X,))
    targets = {str(n.target): convert(n) for n in program.graph.nodes if n.op == "call_function"}
    assert targets["aten.sort.default"] is None and targets["aten.topk.default"] is None
    assert targets["aten.conv_transpose1d.default"] is None
    assert convert(next(n for n in program.graph.nodes if n.op == "placeholder")) is None


def test_training_batch_norm_is_statistics_then_application():
    program, _ = exported(nn.Sequential(nn.BatchNorm2d(4)).train(), (IMG,))
    node = next(n for n in program.graph.nodes if str(n.target) == "aten.batch_norm.default")
    stats, apply, *running = convert(node)
    assert (stats.kind, stats.produces, stats.inputs) == ("batch_norm_stats", None, (node.args[0],))
    assert apply.kind == "batch_norm_apply" and apply.inputs[1] == Intermediate(0)
    assert apply.attrs["count"] == 2 * 6 * 6 and apply.produces == 0
    # the running statistics' next values, written into the buffers (frontend/state.py)
    assert [(r.kind, r.attrs["which"], r.writes, r.produces) for r in running] == [
        ("batch_norm_running", 0, node.args[3], None), ("batch_norm_running", 1, node.args[4], None)]


def test_empty_tensors_become_zeros_their_values_being_unspecified():
    program, _ = exported(Fn(lambda x: torch.empty(3, 4).fill_(1.0) + x), (_normal(3, 4),))
    node = next(n for n in program.graph.nodes if str(n.target) == "aten.empty.memory_format")
    assert [(op.kind, op.attrs["size"]) for op in convert(node)] == [("zeros", (3, 4))]


def test_split_pieces_produce_the_elements_of_the_tuple():
    program, _ = exported(Fn(lambda x: sum(x.split(2, dim=2))), (_normal(2, 3, 6),))
    node = next(n for n in program.graph.nodes if str(n.target) == "aten.split.Tensor")
    pieces = convert(node)
    assert [(p.kind, p.produces, p.attrs["start"], p.attrs["end"]) for p in pieces] == [
        ("slice", 0, 0, 2), ("slice", 1, 2, 4), ("slice", 2, 4, 6)]


def test_view_with_minus_one_is_resolved_from_the_output_shape():
    program, _ = exported(Fn(lambda x: x.view(-1, 5)), (X,))
    node = next(n for n in program.graph.nodes if str(n.target) == "aten.view.default")
    (op,) = convert(node)
    assert op.kind == "reshape" and op.attrs["shape"] == (12, 5)


def test_in_place_overloads_map_to_their_functional_names():
    assert target_name(torch.ops.aten.relu_.default) == "aten.relu.default"
    assert target_name(torch.ops.aten.add_.Tensor) == "aten.add.Tensor"
    assert target_name(torch.ops.aten._softmax.default) == "aten._softmax.default"


def test_described_targets_name_real_overloads_and_library_ops():
    import stratagem.frontend.custom_ops  # noqa: F401 - registers the stratagem:: ops
    for name in described_targets():
        namespace, packet, overload = name.split(".")
        assert overload in getattr(getattr(torch.ops, namespace), packet).overloads(), name


def test_attention_with_dropout_is_described_with_its_own_seed_per_site():
    """Dropout on the attention weights is the TDL's counter-based mask, not an opaque op."""
    q = _normal(2, 4, 6, 8)
    fn = Fn(lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
            + F.scaled_dot_product_attention(q, q, q, dropout_p=0.2, is_causal=True))
    program, _ = exported(fn.train(), (q,))
    nodes = [n for n in program.graph.nodes if str(n.target) == "aten.scaled_dot_product_attention.default"]
    ops = [convert(n)[-1] for n in nodes]
    assert [op.kind for op in ops] == ["scaled_dot_product_attention"] * 2
    assert [op.attrs["dropout_p"] for op in ops] == [0.1, 0.2] and ops[1].attrs["is_causal"]
    assert ops[0].attrs["seed"] != ops[1].attrs["seed"]
    out = TORCH_OPS["scaled_dot_product_attention"]([q, q, q], LIBRARY["scaled_dot_product_attention"]
                                                    .attrs_with_defaults(ops[0].attrs), (2, 4, 6, 8))
    plain = F.scaled_dot_product_attention(q, q, q)
    assert out.shape == plain.shape and not torch.allclose(out, plain)
