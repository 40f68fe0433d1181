"""Front end: capture any nn.Module into the IR (torch.export), and the model zoo. Imports torch."""

from stratagem.frontend.capture import OpaqueOpsWarning, capture

__all__ = ["OpaqueOpsWarning", "capture"]
