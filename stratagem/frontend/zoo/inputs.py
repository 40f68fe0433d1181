"""Example-input factories: random data on a real device (seeded by the caller's generator), and
uninitialized tensors on meta. Each returns the forward's positional arguments, targets included."""

from __future__ import annotations

import torch


def _ints(high: int, shape: tuple[int, ...], device: torch.device, generator: torch.Generator | None
          ) -> torch.Tensor:
    if device.type == "meta":
        return torch.empty(shape, dtype=torch.long, device=device)
    return torch.randint(high, shape, generator=generator, device=_drawn_on(generator)).to(device)


def _floats(shape: tuple[int, ...], device: torch.device, generator: torch.Generator | None) -> torch.Tensor:
    if device.type == "meta":
        return torch.empty(shape, device=device)
    return torch.randn(shape, generator=generator, device=_drawn_on(generator)).to(device)


def _drawn_on(generator: torch.Generator | None) -> torch.device:
    """Where the numbers are drawn: the generator's device (the CPU for None), not torch's default
    device, which a CUDA rank sets (runtime.worker) and a CPU generator cannot draw on."""
    return generator.device if generator is not None else torch.device("cpu")


def images(batch: int, device: torch.device, generator: torch.Generator | None, *, channels: int,
           size: int, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(images [B, C, size, size], labels [B])."""
    return (_floats((batch, channels, size, size), device, generator),
            _ints(classes, (batch,), device, generator))


def features(batch: int, device: torch.device, generator: torch.Generator | None, *, size: int,
             classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(feature vectors [B, size], labels [B])."""
    return _floats((batch, size), device, generator), _ints(classes, (batch,), device, generator)


def tokens(batch: int, device: torch.device, generator: torch.Generator | None, *, vocab: int,
           length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B, T], next-token targets [B, T])."""
    ids = _ints(vocab, (batch, length + 1), device, generator)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def labelled_tokens(batch: int, device: torch.device, generator: torch.Generator | None, *, vocab: int,
                    length: int, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B, T], class labels [B])."""
    return _ints(vocab, (batch, length), device, generator), _ints(classes, (batch,), device, generator)


def translation(batch: int, device: torch.device, generator: torch.Generator | None, *, source_vocab: int,
                target_vocab: int, source_length: int, target_length: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source [B, S], target input [B, T], target output [B, T]: the input shifted by one)."""
    source = _ints(source_vocab, (batch, source_length), device, generator)
    target_in, target_out = tokens(batch, device, generator, vocab=target_vocab, length=target_length)
    return source, target_in, target_out


def bert_pretraining(batch: int, device: torch.device, generator: torch.Generator | None, *, vocab: int,
                     length: int) -> tuple[torch.Tensor, ...]:
    """(tokens [B, S], segment ids [B, S], masked-LM targets [B, S], next-sentence labels [B])."""
    return (_ints(vocab, (batch, length), device, generator), _ints(2, (batch, length), device, generator),
            _ints(vocab, (batch, length), device, generator), _ints(2, (batch,), device, generator))


def token_labels(batch: int, device: torch.device, generator: torch.Generator | None, *, vocab: int,
                 length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids [B, T], labels [B, T]) for Hugging Face models, which shift labels themselves."""
    return _ints(vocab, (batch, length), device, generator), _ints(vocab, (batch, length), device, generator)


def segmentation(batch: int, device: torch.device, generator: torch.Generator | None, *, channels: int,
                 size: int, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(images [B, C, size, size], per-pixel class masks [B, size, size])."""
    return (_floats((batch, channels, size, size), device, generator),
            _ints(classes, (batch, size, size), device, generator))
