"""The package's shape, checked on its source: imports run one way (no circle among modules, the
planner core never imports torch), a function imports only what would otherwise load torch or an
optional package, and each decision named in the architecture has one definition that cost,
simulator, runtime, CLI and reports all call (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "stratagem"
CORE = ("ir", "tdl", "space", "cluster", "cost", "sim", "search")
# modules whose import loads torch (or an optional package): a function may import these lazily
DEFERRED = ("stratagem.frontend", "stratagem.runtime", "stratagem.zoo", "stratagem.cli.", "torch",
            "transformers", "matplotlib", "numba", "scipy")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in sorted(ROOT.rglob("*.py"))}


def _imported(node: ast.AST, here: str, known: set[str] = frozenset()) -> list[str]:
    """What an import statement loads: `from pkg import sub` loads pkg.sub when that is a module
    (the package's __init__ runs first, which is no dependency on it), else pkg."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        base = node.module if node.level == 0 else ".".join(here.split(".")[:-node.level] + [node.module])
        subs = [f"{base}.{a.name}" for a in node.names]
        return [*(s for s in subs if s in known)] if all(s in known for s in subs) else [base, *subs]
    return []


def module_level_imports(tree: ast.Module, here: str, known: set[str]) -> set[str]:
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If):                 # `if TYPE_CHECKING:` and the like
            continue
        found.update(n for n in _imported(node, here, known) if n in known and n != here)
    return found


def function_level_imports(tree: ast.Module, here: str) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                for name in _imported(inner, here)[:1]:
                    out.append((name, inner.lineno))
    return out


def test_no_import_circle_among_modules():
    trees = modules()
    graph = {name: module_level_imports(tree, name, set(trees)) for name, tree in trees.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                pytest.fail("import circle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_the_planner_core_does_not_import_torch():
    for name, tree in modules().items():
        if name.split(".")[1:2] and name.split(".")[1] in CORE:
            imported = [n for node in ast.walk(tree) for n in _imported(node, name)]
            assert not [n for n in imported if n.split(".")[0] == "torch"], name


def test_the_planner_core_imports_neither_the_commands_nor_their_output():
    """The searches tell their progress through search.progress; the bars are the report layer's."""
    for name, tree in modules().items():
        if name.split(".")[1:2] and name.split(".")[1] in CORE:
            imported = [n for node in ast.walk(tree) for n in _imported(node, name)]
            assert not [n for n in imported if n.split(".")[0] == "rich"
                        or n.startswith(("stratagem.report", "stratagem.cli"))], name


def test_functions_import_only_what_would_load_torch_or_an_optional_package():
    offenders = []
    for name, tree in modules().items():
        for imported, line in function_level_imports(tree, name):
            if not imported.startswith(DEFERRED) and imported != "stratagem":
                offenders.append(f"{name}:{line} imports {imported}")
    assert not offenders, "\n".join(offenders)


# ---- one home for each decision ----------------------------------------------------------------

DECISIONS = {
    # decision: (its home module, the names only it defines, modules that must use it)
    "data loader layout": ("stratagem.space.tensor_layout", ("loader_layout",),
                           ("stratagem.cost.edgecost", "stratagem.runtime.schedule")),
    "modes": ("stratagem.search.modes", ("plan_at", "mini_time", "fewest_devices", "by_device_count",
                                         "device_counts"),
              ("stratagem.search.planner", "stratagem.report.planning")),
    "baselines": ("stratagem.search.baselines", ("data_parallel", "owt", "tofu_like", "mesh_tf", "mesh_tf_frontier"),
                  ("stratagem.search.registry", "stratagem.report.frontier_plot", "stratagem.report.reproduce.tensoropt")),
    "placement parsing": ("stratagem.space.placement", ("parse_placement",), ("stratagem.space.config",)),
    "memory cap": ("stratagem.search.context", ("memory_cap",), ("stratagem.cli.plan",)),
    "who owns a weight": ("stratagem.ir.ownership", ("weight_owner", "owned_parameters"),
                          ("stratagem.cost.model", "stratagem.cost.opcost", "stratagem.runtime.schedule")),
    "the strategy value": ("stratagem.space.strategy", ("Strategy", "as_strategy", "reuse_of", "check_strategy"),
                           ("stratagem.plan", "stratagem.sim.builder", "stratagem.cost.model",
                            "stratagem.search.context", "stratagem.runtime.schedule")),
    "transient memory and shared buffers": ("stratagem.cost.transient", ("input_transient_bytes", "input_transient_table",
                                                                          "op_transient_bytes", "plan_transient"),
                                            ("stratagem.cost.model", "stratagem.search.space", "stratagem.search.flags")),
    "how weights are held": ("stratagem.cost.weight_state", ("stored_layout", "sharded_weights", "can_shard_state",
                                                              "check_state"),
                             ("stratagem.cost.opcost", "stratagem.cost.model", "stratagem.search.space",
                              "stratagem.search.strategies", "stratagem.runtime.schedule", "stratagem.plan")),
    "recomputation": ("stratagem.cost.recompute", ("blocks", "with_recompute", "check_recompute"),
                      ("stratagem.cost.model", "stratagem.search.context", "stratagem.runtime.execute", "stratagem.plan")),
    "pipeline stages": ("stratagem.space.pipeline", ("stage_ops", "stage_of", "boundary_tensors", "check_pipeline",
                                                     "staged"),
                        ("stratagem.sim.pipeline", "stratagem.search.pipeline", "stratagem.plan",
                         "stratagem.report.stages")),
    "what micro-batches train as the global batch does": (
        "stratagem.space.micro_batching", ("check_micro_batchable", "loss_reduction"),
        ("stratagem.search.pipeline", "stratagem.runtime.stages")),
    "pipeline schedules": ("stratagem.sim.schedule", ("stage_order", "run_schedule"), ("stratagem.sim.pipeline",)),
    "search registry": ("stratagem.search.registry", ("make_options",),
                        ("stratagem.search.planner", "stratagem.report.planning", "stratagem.search.modes")),
}


def _defined(trees, function: str) -> list[str]:
    return [name for name, tree in trees.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == function]


def _uses(tree: ast.Module, here: str, home: str, names) -> bool:
    """`here` imports the home module, or one of its names from it."""
    for node in ast.walk(tree):
        loaded = _imported(node, here)
        package = home.rsplit(".", 1)[0]              # or through its package's re-export
        if home in loaded or any(f"{home}.{n}" in loaded or f"{package}.{n}" in loaded for n in names):
            return True
    return False


@pytest.mark.parametrize("decision", sorted(DECISIONS))
def test_each_decision_has_one_definition_that_its_users_call(decision):
    home, names, users = DECISIONS[decision]
    trees = modules()
    for name in names:
        assert _defined(trees, name) == [home], f"{decision}: {name} defined in {_defined(trees, name)}"
    for user in users:
        assert _uses(trees[user], user, home, names), f"{decision}: {user} does not use {home}"
