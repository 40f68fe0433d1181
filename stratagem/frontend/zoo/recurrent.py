"""LSTM models unrolled in Python, one `nn.LSTMCell` call (one aten.lstm_cell) per layer per step,
as FlexFlow and Tofu build their RNN graphs: a language model (per-step softmax), a text classifier
(softmax after the last step) and FlexFlow's NMT (2+2 layers with attention over the encoder).
Every forward returns the training loss, a scalar.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LSTMStack(nn.Module):
    """`layers` LSTM cells; `run(steps, state)` unrolls them over a list of [B, input] tensors."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.hidden = hidden
        self.cells = nn.ModuleList(nn.LSTMCell(input_size if i == 0 else hidden, hidden)
                                   for i in range(layers))

    def run(self, steps: list[torch.Tensor], state: list[tuple[torch.Tensor, torch.Tensor]] | None = None
            ) -> tuple[list[torch.Tensor], list[tuple[torch.Tensor, torch.Tensor]]]:
        """Top-layer outputs per step, and each layer's final (h, c)."""
        if state is None:
            zeros = steps[0].new_zeros(steps[0].shape[0], self.hidden)
            state = [(zeros, zeros)] * len(self.cells)
        final = []
        for cell, (h, c) in zip(self.cells, state):
            outputs = []
            for x in steps:
                h, c = cell(x, (h, c))
                outputs.append(h)
            final.append((h, c))
            steps = outputs
        return steps, final


def embedded_steps(embedding: nn.Embedding, tokens: torch.Tensor) -> list[torch.Tensor]:
    """[B, T] token ids -> T tensors of shape [B, E]."""
    embedded = embedding(tokens)
    return [embedded[:, t] for t in range(tokens.shape[1])]


def mean_step_loss(head: nn.Module, outputs: list[torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy at every step (one linear + loss per step), averaged over steps."""
    total = F.cross_entropy(head(outputs[0]), targets[:, 0])
    for t in range(1, len(outputs)):
        total = total + F.cross_entropy(head(outputs[t]), targets[:, t])
    return total / len(outputs)


class LSTMLanguageModel(nn.Module):
    """forward(tokens [B, T], targets [B, T]) -> mean per-step next-token cross-entropy."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = LSTMStack(embed, hidden, layers)
        self.softmax = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.lstm.run(embedded_steps(self.embedding, tokens))
        return mean_step_loss(self.softmax, outputs, targets)


class LSTMClassifier(nn.Module):
    """forward(tokens [B, T], labels [B]) -> cross-entropy of the class predicted after the last step."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = LSTMStack(embed, hidden, layers)
        self.softmax = nn.Linear(hidden, classes)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.lstm.run(embedded_steps(self.embedding, tokens))
        return F.cross_entropy(self.softmax(outputs[-1]), labels)


class AdditiveAttention(nn.Module):
    """Bahdanau et al. 2014: score(s, h_j) = v . tanh(W_q s + W_k h_j), then a context vector."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.score = nn.Linear(hidden, 1, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        return self.key(memory)

    def forward(self, state: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        scores = self.score(torch.tanh(keys + self.query(state).unsqueeze(1))).squeeze(2)
        weights = F.softmax(scores, dim=1)
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1)


class NMT(nn.Module):
    """FlexFlow's NMT: an encoder and a decoder of `layers` LSTM layers each, attention on top of
    the last decoder layer, and a softmax. forward(source [B, S], target_in [B, T], target_out [B, T])."""

    def __init__(self, source_vocab: int, target_vocab: int, hidden: int, layers: int):
        super().__init__()
        self.source_embedding = nn.Embedding(source_vocab, hidden)
        self.target_embedding = nn.Embedding(target_vocab, hidden)
        self.encoder = LSTMStack(hidden, hidden, layers)
        self.decoder = LSTMStack(hidden, hidden, layers)
        self.attention = AdditiveAttention(hidden)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.softmax = nn.Linear(hidden, target_vocab)

    def forward(self, source: torch.Tensor, target_in: torch.Tensor, target_out: torch.Tensor) -> torch.Tensor:
        encoded, state = self.encoder.run(embedded_steps(self.source_embedding, source))
        decoded, _ = self.decoder.run(embedded_steps(self.target_embedding, target_in), state)
        memory = torch.stack(encoded, dim=1)
        keys = self.attention.keys(memory)
        attended = [torch.tanh(self.combine(torch.cat([s, self.attention(s, keys, memory)], dim=1)))
                    for s in decoded]
        return mean_step_loss(self.softmax, attended, target_out)
