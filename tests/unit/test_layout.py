"""House rules no type checker sees: imports editors follow, nodes of one decision each, clean arrows."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ["core", "graphs", "nodes", "checkpoints", "providers", "skills", "cli", "server", "samples"]
#: The one module servers load by file path, which therefore imports the package by absolute names.
BY_PATH = {"server/entry.py"}


def _modules() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]


def _imports(path: Path) -> list[tuple[int, str]]:
    """Each import of the file as (level, module): level 0 is absolute, 1 is ``.x``, 2 is ``..x``."""
    found = []
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.ImportFrom):
            found.append((n.level, n.module or ""))
        elif isinstance(n, ast.Import):
            found.extend((0, a.name) for a in n.names)
    return found


def _package_of(path: Path) -> list[str]:
    return list(path.relative_to(ROOT).parent.parts)


def _target(path: Path, level: int, module: str) -> list[str]:
    """The imported module's folder parts under the package, from a relative import in ``path``."""
    base = _package_of(path)
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return base + (module.split(".") if module else [])


def test_the_package_imports_itself_relatively_so_editors_land_in_the_real_file():
    absolute = [
        f"{p.relative_to(ROOT)}: {m}"
        for p in _modules()
        if str(p.relative_to(ROOT)) not in BY_PATH
        for level, m in _imports(p)
        if level == 0 and (m == "workspace_agent" or m.startswith("workspace_agent."))
    ]
    assert absolute == []


def test_the_links_name_every_folder_and_nothing_else():
    links = ROOT / "workspace_agent"
    assert sorted(p.name for p in links.iterdir()) == sorted(FOLDERS)
    for folder in FOLDERS:
        assert (links / folder).is_symlink() and (links / folder).resolve() == ROOT / folder


#: Modules under nodes/ that are not nodes: what the nodes use (services), the memory nodes' answer schemas
#: and report rows.
HELPERS = {("nodes", "services"), ("nodes", "memory", "answers"), ("nodes", "memory", "rows")}


def test_no_node_module_imports_another_node_module():
    crossing = [
        f"{p.relative_to(ROOT)} imports {'.'.join(t)}"
        for p in sorted((ROOT / "nodes").rglob("*.py"))
        for level, m in _imports(p)
        if level and (t := _target(p, level, m))[:1] == ["nodes"] and tuple(t) not in HELPERS
    ]
    assert crossing == []


def test_server_and_the_lower_rooms_import_nothing_from_cli():
    offending = [
        f"{p.relative_to(ROOT)}: {'.'.join(_target(p, level, m)) if level else m}"
        for p in _modules()
        if p.relative_to(ROOT).parts[0] != "cli"
        for level, m in _imports(p)
        if (_target(p, level, m)[:1] == ["cli"] if level else m.startswith("workspace_agent.cli"))
    ]
    assert offending == []
