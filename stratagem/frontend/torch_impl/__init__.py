"""PyTorch implementations of the TDL library ops, one module per library topic.

Each module exports `IMPLS: dict[str, TorchImpl]`; `stratagem.frontend.torch_ops` merges them.
"""
