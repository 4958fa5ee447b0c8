"""The wheel holds the whole package under ``workspace_agent/`` and nothing under a generic top-level name.

The repository shows ``graphs/``, ``nodes/``, ``checkpoints/``… at its root and maps them into the
``workspace_agent`` namespace through ``package-dir``. A folder added without its entry in
``[tool.setuptools] packages`` would be silently left out of a non-editable install while every editable
test still passed; this test builds the real wheel to catch that.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(tmp_path: Path) -> zipfile.ZipFile:
    """Build from a copy of the project's sources, so the working tree gets no build/ or egg-info."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in config["tool"]["setuptools"]["package-dir"].values():
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
    )
    [wheel] = out.glob("workspace_agent-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_holds_every_module_and_sample_under_the_namespace_only(tmp_path):
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    wheel = build_wheel(tmp_path)
    names = set(wheel.namelist())

    expected = set()
    for package, folder in folders.items():
        base = package.replace(".", "/")
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                expected.add(f"{base}/{path.relative_to(ROOT / folder).as_posix()}")
    samples = [p for p in (ROOT / "samples" / "workspace").iterdir() if p.is_file()]
    assert samples, "the sample documents are missing from the repository"
    expected |= {f"workspace_agent/samples/workspace/{p.name}" for p in samples}
    assert {"graphs", "nodes", "checkpoints", "skills"} <= set(folders.values())
    assert "workspace_agent/skills/mcp/hub.py" in expected, "sub-packages are walked too"

    missing = sorted(expected - names)
    assert not missing, f"left out of the wheel (add the folder to [tool.setuptools] packages): {missing}"
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"workspace_agent"}, tops
    [dist_info] = [t for t in tops if t.endswith(".dist-info")]
    assert wheel.read(f"{dist_info}/top_level.txt").decode().split() == ["workspace_agent"]
    entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
    assert "workspace-agent = workspace_agent.cli.main:main" in entry_points
