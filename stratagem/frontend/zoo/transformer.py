"""Post-LN transformers: the encoder-decoder of Vaswani et al. 2017 and BERT (Devlin et al. 2019).

Attention is one `scaled_dot_product_attention` per layer; projections carry biases as in both
papers. The encoder-decoder shares one embedding matrix between source, target and the softmax
(Vaswani §3.4); BERT ties its masked-LM decoder to the word embeddings. Forward returns the loss.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        source = x if memory is None else memory
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(self.split(self.q(x)), self.split(self.k(source)),
                                           self.split(self.v(source)), dropout_p=p, is_causal=causal)
        b, _, t, _ = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int, activation: str):
        super().__init__()
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        return self.down(F.gelu(h) if self.activation == "gelu" else F.relu(h))


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, dropout: float, activation: str = "relu",
                 eps: float = 1e-5):
        super().__init__()
        self.attention = MultiHeadAttention(dim, heads, dropout)
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.ffn = FeedForward(dim, hidden, activation)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.attention(x)))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, dropout: float):
        super().__init__()
        self.self_attention = MultiHeadAttention(dim, heads, dropout)
        self.norm1 = nn.LayerNorm(dim)
        self.cross_attention = MultiHeadAttention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = FeedForward(dim, hidden, "relu")
        self.norm3 = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.self_attention(x, causal=True)))
        x = self.norm2(x + self.drop(self.cross_attention(x, memory)))
        return self.norm3(x + self.drop(self.ffn(x)))


def sinusoid_table(length: int, dim: int) -> torch.Tensor:
    position = torch.arange(length).float()[:, None]
    rate = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table


class Transformer(nn.Module):
    """forward(source [B, S], target_in [B, T], target_out [B, T]) -> token cross-entropy."""

    def __init__(self, vocab: int, dim: int, heads: int, hidden: int, layers: int, max_len: int,
                 dropout: float = 0.1):
        super().__init__()
        self.dim = dim
        self.embedding = nn.Embedding(vocab, dim)
        self.encoder = nn.ModuleList(EncoderLayer(dim, heads, hidden, dropout) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderLayer(dim, heads, hidden, dropout) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        self.register_buffer("positions", sinusoid_table(max_len, dim), persistent=False)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        scaled = self.embedding(tokens) * math.sqrt(self.dim)
        return self.drop(scaled + self.positions[: tokens.shape[1]])

    def forward(self, source: torch.Tensor, target_in: torch.Tensor, target_out: torch.Tensor) -> torch.Tensor:
        memory = self.embed(source)
        for layer in self.encoder:
            memory = layer(memory)
        x = self.embed(target_in)
        for layer in self.decoder:
            x = layer(x, memory)
        logits = F.linear(x, self.embedding.weight)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target_out.reshape(-1))


class Bert(nn.Module):
    """BERT pre-training: forward(tokens, segments [B, S], mlm_targets [B, S], nsp_labels [B])
    -> masked-LM loss over every position + next-sentence loss."""

    def __init__(self, vocab: int = 30522, dim: int = 768, heads: int = 12, hidden: int = 3072,
                 layers: int = 12, max_len: int = 512, dropout: float = 0.1):
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        self.segment = nn.Embedding(2, dim)
        self.embed_norm = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, hidden, dropout, "gelu", 1e-12)
                                    for _ in range(layers))
        self.pooler = nn.Linear(dim, dim)
        self.transform = nn.Linear(dim, dim)
        self.transform_norm = nn.LayerNorm(dim, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))
        self.next_sentence = nn.Linear(dim, 2)
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor, segments: torch.Tensor, mlm_targets: torch.Tensor,
                nsp_labels: torch.Tensor) -> torch.Tensor:
        positions = self.position.weight[: tokens.shape[1]]
        x = self.drop(self.embed_norm(self.word(tokens) + positions + self.segment(segments)))
        for layer in self.layers:
            x = layer(x)
        h = self.transform_norm(F.gelu(self.transform(x)))
        logits = F.linear(h, self.word.weight, self.decoder_bias)
        mlm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), mlm_targets.reshape(-1))
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return mlm + F.cross_entropy(self.next_sentence(pooled), nsp_labels)
