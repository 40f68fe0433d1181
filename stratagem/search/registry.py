"""Every search by name, one shape: `run(ctx: PlanningContext, options: Options) -> Plan`, with a
frozen dataclass of typed options per search. The public API (sg.search, find_strategy), the CLI
(`stratagem plan --algorithm NAME --option KEY=VALUE`) and the reports all read this table; a new
search is one module with its options and `run`, and one line below.

    algorithm(name)               the registered search (an unknown name lists them, names the closest)
    make_options(name, given)     its options from a mapping: unknown keys refused, CLI strings converted
    run(ctx, name, options)       the plan
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stratagem import values
from stratagem.errors import ConfigError
from stratagem.plan import Plan
from stratagem.search import baselines, exhaustive, expert, ft_search, mcmc, pipeline, random_search, tofu
from stratagem.search.context import NoOptions, PlanningContext


@dataclass(frozen=True)
class Algorithm:
    name: str
    run: Callable[[PlanningContext, Any], Plan]
    options: type                       # a frozen dataclass; NoOptions when it takes none
    summary: str


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ft", ft_search.ft, ft_search.FTSearchOptions, "TensorOpt's frontier tracking: its fastest point"),
    Algorithm("data-parallel", baselines.data_parallel, NoOptions, "every op splits its batch"),
    Algorithm("fsdp", baselines.fsdp, baselines.FSDPOptions, "data parallel, weights and their state sharded"),
    Algorithm("fsdp-tp", baselines.fsdp_tp, baselines.FSDPTPOptions,
              "practitioners' LLM setting: tensor parallel in a node, FSDP across, blocks recomputed"),
    Algorithm("model-parallel", baselines.model_parallel, NoOptions, "whole ops to devices, balanced"),
    Algorithm("owt", baselines.owt, NoOptions, "Krizhevsky's one weird trick"),
    Algorithm("optcnn", baselines.optcnn, NoOptions, "the additive (Eq. 3) min-time end of FT's frontier"),
    Algorithm("tofu-like", baselines.tofu_like, baselines.RestrictedOptions, "every tensor split, none replicated"),
    Algorithm("mesh-tf", baselines.mesh_tf, baselines.MeshTFOptions, "Mesh-TensorFlow's restricted space"),
    Algorithm("expert", expert.expert, NoOptions, "what experts configure: OWT for CNNs, Wu et al. for RNNs"),
    Algorithm("mcmc", mcmc.mcmc, mcmc.MCMCOptions, "FlexFlow's MCMC priced by the simulator"),
    Algorithm("exhaustive", exhaustive.exhaustive, exhaustive.ExhaustiveOptions, "branch and bound (small spaces)"),
    Algorithm("tofu", tofu.tofu, tofu.TofuOptions, "Tofu's recursive partitioning (least communication)"),
    Algorithm("pipeline", pipeline.pipeline, pipeline.PipelineOptions,
              "pipeline stages on device blocks, micro-batches, a practitioners' plan in each stage"),
    Algorithm("random", random_search.random_search, random_search.RandomOptions, "the best of random strategies"),
)}


def algorithm(name: str) -> Algorithm:
    return ALGORITHMS[values.one_of(name, "search algorithm", sorted(ALGORITHMS))]


def option_fields(name: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(algorithm(name).options)}


def make_options(name: str, given: Any = None) -> Any:
    """`given` as the search's options: an instance as it is; a mapping checked and converted
    (a value given as text, as the CLI gives it, becomes the field's type)."""
    options_type = algorithm(name).options
    if isinstance(given, options_type):
        return given
    given = dict(given or {})
    known = option_fields(name)
    unknown = sorted(k for k in given if k not in known)
    if unknown:
        raise ConfigError(f"search algorithm {name!r} takes no option {unknown[0]!r}",
                          expected=f"some of {sorted(known)}" if known else "no options", got=repr(unknown[0]),
                          hint=values.closest(unknown[0], known))
    hints = typing.get_type_hints(options_type)
    return options_type(**{k: _typed(k, v, hints[k]) for k, v in given.items()})


def run(ctx: PlanningContext, name: str, options: Any = None) -> Plan:
    return algorithm(name).run(ctx, make_options(name, options))


def _typed(key: str, value: Any, hint: Any) -> Any:
    """A CLI string as the field's scalar type (int, float, bool, str, or None where allowed)."""
    if not isinstance(value, str):
        return value
    allowed = [t for t in typing.get_args(hint) if t is not type(None)] or [hint]
    if value.lower() == "none" and type(None) in typing.get_args(hint):
        return None
    for kind in allowed:
        converted = _as(kind, value)
        if converted is not None:
            return converted
    raise ConfigError(f"option {key!r} is not valid", expected=" or ".join(getattr(t, "__name__", str(t))
                                                                            for t in allowed), got=repr(value))


def _as(kind: Any, text: str) -> Any:
    if kind is bool:
        return {"true": True, "false": False, "1": True, "0": False}.get(text.lower())
    if kind in (int, float, str):
        try:
            return kind(text)
        except ValueError:
            return None
    return None


def describe(name: str) -> str:
    """One line per option: name, type, default and help, for the CLI's help."""
    lines = []
    for f in dataclasses.fields(algorithm(name).options):
        default = f.default if f.default is not dataclasses.MISSING else "required"
        lines.append(f"{f.name}={default!r}  {f.metadata.get('help', '')}".rstrip())
    return "; ".join(lines) or "no options"


__all__ = ["ALGORITHMS", "Algorithm", "algorithm", "describe", "make_options", "option_fields", "run"]
