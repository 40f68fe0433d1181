"""ATen -> TDL converters, one module per topic; `stratagem.frontend.aten_map` merges them.

Each module exports `CONVERTERS: dict[str, Converter]`, keyed by the overload's name as
`str(node.target)` prints it ("aten.add.Tensor"); a converter takes the fx node and returns the
library ops that compute it, or None when these arguments are not described.
"""
