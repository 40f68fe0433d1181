"""Cluster files (YAML or JSON) and presets -> ClusterSpec, with errors that name the field.

`load_spec(name_or_path)`: a path to a .yaml/.yml/.json file, or a preset name. Preset names are
files in stratagem/cluster/presets/; a family file whose name carries `N` (`a100-Nx8.yaml`,
`cpu-1xN.yaml`) serves every name of that shape (`a100-4x8`, `cpu-1x2`), with `N` substituted into
`nodes` or `devices_per_node`.

File format (every bandwidth per direction in bytes/s, every latency in s, per hop):

    name, description, nodes, devices_per_node
    device:      kind, matrix_flops_per_s {dtype: peak, default: peak}, vector_flops_per_s {...},
                 memory_bandwidth_bytes_per_s, memory_bytes (bytes, or a size such as 16GB), launch_overhead_s,
                 optional matrix_efficiency / vector_efficiency / memory_efficiency: [[size, eta], ...]
                 (matrix_efficiency also {dtype: [[size, eta], ...], default: [...]}, per dtype)
    fabrics:     list of {type: mesh, name, link: {bandwidth_bytes_per_s, latency_s},
                          pairs: [[local a, local b, links], ...]}
                         {type: switch, name, link}                      (NVSwitch, loopback)
                         {type: pcie_tree, name, link, switches: [[local devices], ...],
                          sockets: [[switch indices], ...], socket_link}
    network:     nics_per_node, link (NIC <-> network), attach: devices | [vertex per NIC]
                 (vertices: device:<i>, <switch name>, <tree name>.sw<k>, <tree name>.cpu<s>),
                 attach_link (device <-> NIC, when NICs attach to devices),
                 optional switches: {rails: true|false (default false), levels: [leaf first:
                   {name, nodes: nodes one switch reaches}, ..., {name, oversubscription: 4 or
                   "4:1" (default 1), latency_s (default link's)}; the last joins every node]}
                 (without it the network is one non-blocking switch, `net`; cluster.switches)
    collectives: optional protocols [{name, base_latency_s, latency_scale, bandwidth_factor}],
                 reduction_s_per_byte, overlap_compute (default false: a rank waits for its
                 collectives, as stratagem.runtime does; true: a dataflow runtime overlaps them),
                 native_all_to_all (default true; false where a shard-to-shard move runs as
                 all-gather + chunk, as DTensor does on gloo)
    host:        optional {link: {bandwidth_bytes_per_s, latency_s} (each device's own link to host
                 memory), optimizer_bytes_per_s (optimizer traffic one device's process steps per
                 second on the host CPU), memory_bytes (per node)}: where the "offloaded" weight
                 state keeps weights, gradients and optimizer state; without it nothing is offloaded
    tables:      optional {ops: FILE, comm: FILE}: measured op and collective times (`stratagem
                 profile ops|comm`), paths relative to the cluster file; every command that plans,
                 simulates or validates on the cluster prices with them where they have an entry

`cluster_data(name_or_path)` is a cluster's file content (a preset's with its family's count
filled in), and `with_tables(name_or_path, out, ops=, comm=)` writes a cluster file that names
measured tables (what `stratagem profile --cluster-out` writes).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from stratagem.cluster.spec import (
    CALCULON_MATRIX, NCCL_PROTOCOLS, ClusterSpec, DeviceSpec, EfficiencyCurve, Fabric, HostSpec, LinkSpec, MeshFabric,
    NetworkSpec, PCIeTreeFabric, Protocol, SwitchFabric, SwitchLevel, SwitchLevels,
)
from stratagem.errors import ConfigError
from stratagem.fields import Fields
from stratagem.files import atomic_write_text, parse_json, parse_yaml, read_text
from stratagem.values import closest

PRESET_DIR = Path(__file__).parent / "presets"
_SHAPED = re.compile(r"^(?P<base>[a-z0-9]+)-(?P<nodes>\d+)x(?P<per>\d+)$")


def preset_files() -> list[Path]:
    return sorted(PRESET_DIR.glob("*.yaml"))


def preset_names() -> list[str]:
    return [p.stem for p in preset_files()]


CLUSTER_SUFFIXES = (".yaml", ".yml", ".json")


def load_spec(name_or_path: str | Path) -> ClusterSpec:
    if not isinstance(name_or_path, (str, Path)):
        raise ConfigError("cluster not understood", expected="a preset name or a path to a YAML/JSON cluster file",
                          got=repr(name_or_path))
    data, source, directory = _located_data(name_or_path)
    return parse_spec(data, source, directory)


def cluster_data(name_or_path: str | Path) -> dict[str, Any]:
    """The content of a cluster file, or of a preset (a family's count filled in)."""
    return dict(_located_data(name_or_path)[0])


def _located_data(name_or_path: str | Path) -> tuple[Any, str, Path | None]:
    """(content, its source for errors, the directory its relative paths start from)."""
    path = Path(name_or_path)
    if path.suffix in CLUSTER_SUFFIXES:
        return _read(path), str(path), path.resolve().parent
    if str(name_or_path) and path.exists():
        raise ConfigError(f"{str(path)!r} is not a cluster file",
                          expected=f"a name ending in {', '.join(CLUSTER_SUFFIXES)}",
                          got=repr(path.suffix or path.name), hint="Cluster files are YAML or JSON")
    data, source = _preset_data(str(name_or_path))
    return data, source, None


def _read(path: Path) -> Any:
    text = read_text(path, "cluster file")
    return parse_json(text, path) if path.suffix == ".json" else parse_yaml(text, path)


def _preset_data(name: str) -> tuple[Any, str]:
    exact = PRESET_DIR / f"{name}.yaml"
    if exact.is_file():
        return _read(exact), exact.name
    match = _SHAPED.match(name)
    if match:
        base, nodes, per = match["base"], int(match["nodes"]), int(match["per"])
        for family, key, count in ((f"{base}-Nx{per}", "nodes", nodes),
                                   (f"{base}-{nodes}xN", "devices_per_node", per)):
            path = PRESET_DIR / f"{family}.yaml"
            if path.is_file():
                if count < 1:
                    raise ConfigError(f"preset {name!r}", expected=f"{key} >= 1", got=str(count))
                data = dict(_read(path))
                data.update({key: count, "name": name})
                return data, path.name
    suggestion = closest(name, [*preset_names(), *_family_examples()])
    raise ConfigError(f"no cluster preset {name!r}", expected=f"one of {preset_names()}", got=repr(name),
                      hint=(f"{suggestion} " if suggestion else "") + "Families ending in N take any count, e.g. "
                           "a100-4x8, h100-16x8, cpu-1x4; or give a path to a .yaml/.json file")


def _family_examples() -> list[str]:
    """A family's names at small counts (`cpu-1x2`, `a100-2x8`): what a misspelt name is near."""
    return [name.replace("N", str(n)) for name in preset_names() if "N" in name for n in (1, 2, 4, 8)]


# ---- parsing -------------------------------------------------------------------------------------

_TOP = {"name", "description", "nodes", "devices_per_node", "device", "fabrics", "network",
        "collectives", "sources", "tables", "host"}
TABLES = ("ops", "comm")


def parse_spec(data: Any, source: str, directory: Path | None = None) -> ClusterSpec:
    """`directory`: where the file's relative table paths start (the working directory if None)."""
    top = Fields.of(data, source)
    top.check_known(_TOP)
    tables = _tables(top, directory)
    nodes, per = top.integer("nodes"), top.integer("devices_per_node")
    fabrics = tuple(_fabric(Fields.of(f, source, f"fabrics[{i}]"), per)
                    for i, f in enumerate(top.sequence("fabrics", [])))
    _check_unique_names(top, fabrics)
    network = _network(top.sub("network"), per, fabrics, nodes) if top.has("network") else None
    if nodes > 1 and network is None:
        raise top.error("network", "a network section when nodes > 1", None)
    collectives = top.sub("collectives") if top.has("collectives") else Fields({}, source, "collectives")
    collectives.check_known({"protocols", "reduction_s_per_byte", "overlap_compute", "native_all_to_all"})
    return ClusterSpec(
        name=top.text("name"), description=str(top.raw("description", "")), num_nodes=nodes,
        devices_per_node=per, device=_device(top.sub("device")), fabrics=fabrics, network=network,
        protocols=_protocols(collectives),
        reduction_s_per_byte=collectives.number("reduction_s_per_byte", 0.0, positive=False),
        overlap_compute=collectives.boolean("overlap_compute", False),
        native_all_to_all=collectives.boolean("native_all_to_all", True),
        ops_table=tables.get("ops"), comm_table=tables.get("comm"),
        host=_host(top.sub("host")) if top.has("host") else None)


def _host(f: Fields) -> HostSpec:
    f.check_known({"link", "optimizer_bytes_per_s", "memory_bytes"})
    return HostSpec(_link(f.sub("link")), f.number("optimizer_bytes_per_s"), f.size("memory_bytes"))


def _tables(top: Fields, directory: Path | None) -> dict[str, str]:
    """The measured tables a cluster file names, as absolute paths to files that exist."""
    if not top.has("tables"):
        return {}
    tables = top.sub("tables")
    tables.check_known(set(TABLES))
    found = {}
    for key in TABLES:
        if tables.has(key):
            path = Path(tables.text(key))
            path = path if path.is_absolute() else (directory or Path.cwd()) / path
            if not path.is_file():
                raise tables.error(key, "a table file that exists (relative to the cluster file)", str(path),
                                   hint=f"Write it with `stratagem profile {key}`, or fix the path")
            found[key] = str(path.resolve())
    return found


def with_tables(base: str | Path, out: str | Path, ops: str | Path | None = None,
                comm: str | Path | None = None) -> None:
    """Write cluster file `out`: `base`'s content (a preset or a file; `out` itself when it exists)
    naming its tables and those given, as paths relative to `out`; checked before it is written."""
    out = Path(out)
    if out.suffix not in (".yaml", ".yml"):
        raise ConfigError("the cluster file to write", expected="a name ending in .yaml or .yml", got=str(out))
    data, name, directory = _located_data(out if out.is_file() else base)
    data, spec = dict(data), parse_spec(data, name, directory)
    tables = {key: path for key, path in (("ops", spec.ops_table), ("comm", spec.comm_table)) if path}
    tables.update({key: str(Path(path).resolve()) for key, path in (("ops", ops), ("comm", comm)) if path})
    data["tables"] = {key: os.path.relpath(path, out.resolve().parent) for key, path in tables.items()}
    parse_spec(data, str(out), out.resolve().parent)
    atomic_write_text(out, yaml.safe_dump(data, sort_keys=False))


def _check_unique_names(top: Fields, fabrics: tuple[Fabric, ...]) -> None:
    seen: set[str] = set()
    for i, fabric in enumerate(fabrics):
        if fabric.name in seen:
            raise top.error(f"fabrics[{i}].name", "a name no other fabric has", fabric.name)
        seen.add(fabric.name)


def _link(f: Fields) -> LinkSpec:
    f.check_known({"bandwidth_bytes_per_s", "latency_s"})
    return LinkSpec(f.number("bandwidth_bytes_per_s"), f.number("latency_s", positive=False))


def _curve(f: Fields, key: str, default: EfficiencyCurve) -> EfficiencyCurve:
    if not f.has(key):
        return default
    if isinstance(f.raw(key), Mapping):
        return _curve(f.sub(key), "default", default)
    points = []
    for i, item in enumerate(f.sequence(key)):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise f.error(f"{key}[{i}]", "a [size, efficiency] pair", item)
        size, eff = f.as_number(f"{key}[{i}]", item[0]), f.as_number(f"{key}[{i}]", item[1])
        if eff > 1:
            raise f.error(f"{key}[{i}]", "an efficiency in (0, 1]", eff)
        points.append((size, eff))
    if not points or [p[0] for p in points] != sorted({p[0] for p in points}):
        raise f.error(key, "pairs with sizes strictly ascending", f.raw(key))
    return EfficiencyCurve(tuple(points))


def _device(f: Fields) -> DeviceSpec:
    f.check_known({"kind", "matrix_flops_per_s", "vector_flops_per_s", "memory_bandwidth_bytes_per_s",
                   "memory_bytes", "launch_overhead_s", "matrix_efficiency", "vector_efficiency",
                   "memory_efficiency", "unaligned_gemm_factor", "fused_kernels"})
    base = DeviceSpec(f.text("kind"), f.number_table("matrix_flops_per_s"),
                      f.number_table("vector_flops_per_s"), f.number("memory_bandwidth_bytes_per_s"),
                      f.size("memory_bytes"), f.number("launch_overhead_s", positive=False))
    return DeviceSpec(base.kind, base.matrix_flops_per_s, base.vector_flops_per_s,
                      base.memory_bandwidth_bytes_per_s, base.memory_bytes, base.launch_overhead_s,
                      _curve(f, "matrix_efficiency", base.matrix_efficiency),
                      _curve(f, "vector_efficiency", base.vector_efficiency),
                      _curve(f, "memory_efficiency", base.memory_efficiency),
                      _curves_by_dtype(f, "matrix_efficiency"), _unaligned_gemm_factor(f), _fused_kernels(f))


def _fused_kernels(f: Fields) -> tuple[str, ...]:
    if not f.has("fused_kernels"):
        return ()
    kinds = f.raw("fused_kernels")
    if not isinstance(kinds, list) or not all(isinstance(k, str) and k for k in kinds):
        raise f.error("fused_kernels", "a list of op kinds (e.g. [rms_norm])", kinds)
    return tuple(kinds)


def _unaligned_gemm_factor(f: Fields) -> float:
    if not f.has("unaligned_gemm_factor"):
        return 1.0
    factor = f.number("unaligned_gemm_factor")
    if factor > 1:
        raise f.error("unaligned_gemm_factor", "a fraction in (0, 1]", factor)
    return factor


def _curves_by_dtype(f: Fields, key: str) -> tuple[tuple[str, EfficiencyCurve], ...]:
    """`key: {dtype: [[size, eta], ...], default: ...}`: the curves of the named dtypes."""
    if not f.has(key) or not isinstance(f.raw(key), Mapping):
        return ()
    table = f.sub(key)
    return tuple((str(dtype), _curve(table, str(dtype), CALCULON_MATRIX))
                 for dtype in table.data if dtype != "default")


_RESERVED = re.compile(r"^(d\d+|nic\d+|net)$")


def _fabric(f: Fields, per: int) -> Fabric:
    kind = f.text("type")
    if _RESERVED.match(f.text("name")) or "." in f.text("name"):
        raise f.error("name", "a fabric name other than d<i>, nic<k>, net, without dots", f.raw("name"))
    if kind == "mesh":
        f.check_known({"type", "name", "link", "pairs"})
        return MeshFabric(f.text("name"), _link(f.sub("link")), _pairs(f, per))
    if kind == "switch":
        f.check_known({"type", "name", "link"})
        return SwitchFabric(f.text("name"), _link(f.sub("link")))
    if kind == "pcie_tree":
        f.check_known({"type", "name", "link", "switches", "sockets", "socket_link"})
        switches = _groups(f, "switches", per, "local device")
        sockets = _groups(f, "sockets", len(switches), "switch index")
        socket_link = _link(f.sub("socket_link")) if f.has("socket_link") else None
        if len(sockets) > 1 and socket_link is None:
            raise f.error("socket_link", "a link between sockets when there are several", None)
        return PCIeTreeFabric(f.text("name"), _link(f.sub("link")), switches, sockets, socket_link)
    raise f.error("type", "one of 'mesh', 'switch', 'pcie_tree'", kind)


def _pairs(f: Fields, per: int) -> tuple[tuple[int, int, int], ...]:
    pairs, seen = [], set()
    for i, item in enumerate(f.sequence("pairs")):
        ok = (isinstance(item, (list, tuple)) and len(item) == 3 and all(isinstance(x, int) for x in item)
              and 0 <= item[0] < per and 0 <= item[1] < per and item[0] != item[1] and item[2] >= 1)
        if not ok:
            raise f.error(f"pairs[{i}]", f"[device a, device b, links] with devices in 0..{per - 1}", item)
        if frozenset(item[:2]) in seen:
            raise f.error(f"pairs[{i}]", "each pair of devices once (give the number of links as the third entry)",
                          item)
        seen.add(frozenset(item[:2]))
        pairs.append((item[0], item[1], item[2]))
    return tuple(pairs)


def _groups(f: Fields, key: str, count: int, what: str) -> tuple[tuple[int, ...], ...]:
    groups, seen = [], set()
    for i, group in enumerate(f.sequence(key)):
        if not isinstance(group, (list, tuple)) or not all(
                isinstance(x, int) and 0 <= x < count and x not in seen for x in group):
            raise f.error(f"{key}[{i}]", f"a list of distinct {what}s in 0..{count - 1}", group)
        seen.update(group)
        groups.append(tuple(group))
    return tuple(groups)


def _network(f: Fields, per: int, fabrics: tuple[Fabric, ...], nodes: int) -> NetworkSpec:
    f.check_known({"nics_per_node", "link", "attach", "attach_link", "switches"})
    nics = f.integer("nics_per_node")
    attach_raw = f.raw("attach")
    if attach_raw == "devices":
        if nics != per:
            raise f.error("attach", f"'devices' only with one NIC per device ({per})", attach_raw)
        attach = tuple(f"device:{i}" for i in range(nics))
    else:
        attach = tuple(str(a) for a in f.sequence("attach"))
        if len(attach) != nics:
            raise f.error("attach", f"{nics} entries (one per NIC) or 'devices'", attach_raw)
    known = host_vertices(fabrics) | {f"device:{i}" for i in range(per)}
    for i, vertex in enumerate(attach):
        if vertex not in known:
            raise f.error(f"attach[{i}]", f"one of {sorted(known)}", vertex)
    needs_attach_link = any(a.startswith("device:") for a in attach)
    attach_link = _link(f.sub("attach_link")) if f.has("attach_link") else None
    if needs_attach_link and attach_link is None:
        raise f.error("attach_link", "the device-to-NIC link when NICs attach to devices", None)
    link = _link(f.sub("link"))
    switches = _switches(f.sub("switches"), nodes, link) if f.has("switches") else None
    return NetworkSpec(nics, link, attach, attach_link, switches)


_LEVEL_NAME = re.compile(r"^[A-Za-z][A-Za-z_-]*$")
_RATIO = re.compile(r"^\s*(?P<up>[0-9.eE+]+)\s*:\s*(?P<down>[0-9.eE+]+)\s*$")
SWITCHES_EXAMPLE = "levels: [{name: leaf, nodes: 32}, {name: spine, oversubscription: 4}]"


def _switches(f: Fields, nodes: int, link: LinkSpec) -> SwitchLevels:
    """`network.switches`: levels of switches between nodes, leaf first (cluster.switches)."""
    f.check_known({"levels", "rails"})
    raw = f.sequence("levels")
    if not raw:
        raise f.error("levels", f"at least one level, e.g. {SWITCHES_EXAMPLE}", raw,
                      hint="Leave 'switches' out for one non-blocking switch")
    levels: list[SwitchLevel] = []
    for i, item in enumerate(raw):
        levels.append(_level(Fields.of(item, f.source, f.where(f"levels[{i}]")), i, len(raw), levels, nodes, link))
    rails = f.boolean("rails", False)
    if rails and len(levels) < 2:
        raise f.error("levels", "a level above the rail switches (rails: true puts NIC k of each leaf block "
                      "on its own switch k; something must join the rails)", raw,
                      hint=f"Add a spine level, e.g. {SWITCHES_EXAMPLE}, or set rails: false")
    return SwitchLevels(tuple(levels), rails)


def _level(f: Fields, i: int, count: int, below: list[SwitchLevel], nodes: int, link: LinkSpec) -> SwitchLevel:
    f.check_known({"name", "nodes", "oversubscription", "latency_s"})
    name = f.text("name")
    if not _LEVEL_NAME.match(name) or name == "net":
        raise f.error("name", "letters, '_' or '-' only, starting with a letter, not 'net' (switches are named "
                      "<name><index>)", name)
    if any(level.name == name for level in below):
        raise f.error("name", "a name no other level has", name)
    top = i == count - 1
    size = _level_nodes(f, top, below, nodes)
    if i == 0:
        for key in ("oversubscription", "latency_s"):
            if f.has(key):
                raise f.error(key, f"no {key} on the first (leaf) level, which has no level below it", f.raw(key),
                              hint=f"A NIC's hop to its leaf is network.link; put {key} on the level above "
                                   "(it describes the leaf's uplinks to that level)")
        return SwitchLevel(name, size)
    return SwitchLevel(name, size, _ratio(f), f.number("latency_s", link.latency_s, positive=False))


def _level_nodes(f: Fields, top: bool, below: list[SwitchLevel], nodes: int) -> int | None:
    if top and not f.has("nodes"):
        return None
    if not f.has("nodes"):
        raise ConfigError(f"{f.named('nodes')} is missing", expected="how many nodes one switch of this level "
                          "reaches (only the top level may leave it out: it joins every node)",
                          got=f"keys {sorted(f.data)}", hint="Add nodes: N, e.g. nodes: 32 for leaves of 32 nodes")
    size = f.integer("nodes")
    under = below[-1].nodes if below else None
    if under is not None and (size <= under or size % under):
        raise f.error("nodes", f"a multiple of the level below's {under} nodes, larger than it", size,
                      hint="Each switch joins whole switches of the level below")
    if top and size < nodes:
        raise f.error("nodes", f"at least the cluster's {nodes} nodes (the top level joins every node)", size,
                      hint="Leave 'nodes' out at the top level, or add a level above this one")
    return size


def _ratio(f: Fields) -> float:
    """An oversubscription ratio >= 1: a number (4) or text "4:1"."""
    raw = f.raw("oversubscription", 1.0)
    ratio = _ratio_value(raw)
    if ratio is None or ratio < 1:
        raise f.error("oversubscription", "a ratio >= 1, such as 2, 4 or '4:1' (what the switches below have "
                      "towards the nodes over what their uplinks to this level carry)", raw,
                      hint="1 (the default) is a non-blocking level")
    return ratio


def _ratio_value(raw: Any) -> float | None:
    if isinstance(raw, str):
        match = _RATIO.match(raw)
        try:
            raw = float(match["up"]) / float(match["down"]) if match else float(raw)
        except (ValueError, ZeroDivisionError):
            return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return None
    return float(raw)


def host_vertices(fabrics: tuple[Fabric, ...]) -> set[str]:
    """Names of the non-device vertices fabrics create (NICs may attach to them)."""
    names: set[str] = set()
    for fabric in fabrics:
        if isinstance(fabric, SwitchFabric):
            names.add(fabric.name)
        elif isinstance(fabric, PCIeTreeFabric):
            names.update(f"{fabric.name}.sw{k}" for k in range(len(fabric.switches)))
            names.update(f"{fabric.name}.cpu{s}" for s in range(len(fabric.sockets)))
    return names


def _protocols(f: Fields) -> tuple[Protocol, ...]:
    if not f.has("protocols"):
        return NCCL_PROTOCOLS
    found = []
    for i, item in enumerate(f.sequence("protocols")):
        p = Fields.of(item, f.source, f.where(f"protocols[{i}]"))
        p.check_known({"name", "base_latency_s", "latency_scale", "bandwidth_factor"})
        found.append(Protocol(p.text("name"), p.number("base_latency_s", positive=False),
                              p.number("latency_scale", positive=False), p.number("bandwidth_factor")))
    if not found:
        raise f.error("protocols", "at least one protocol", [])
    return tuple(found)
