"""Every module and package of ``scheduling/`` sits on a layer of the import-linter ``layers`` contract (issue 34
item 5). import-linter checks the arrows only between the modules a contract names: a module left out of it
(forms.py, charts.py, reports.py … once were) may import anything and be imported by anything, and nothing says
so. This scan is what import-linter does not do: it lists the package and the contract and compares them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_LAYERED = {"migrations"}  # Django's own: generated, imported by nobody


def layered_names(pyproject: Path) -> set[str]:
    """The module names the ``layers`` contract puts on a layer (siblings joined by ":" each count)."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    layers = [layer for contract in contracts if contract["type"] == "layers" for layer in contract["layers"]]
    return {name.strip() for layer in layers for name in layer.split(":")}


def top_level_names(package: Path) -> set[str]:
    """``scheduling.x`` for each module ``x.py`` and each package ``x/`` (a folder with ``__init__.py``)."""
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file() and p.name not in NOT_LAYERED}
    return {f"{package.name}.{name}" for name in modules | packages}


def test_every_module_of_scheduling_is_on_a_layer():
    missing = top_level_names(ROOT / "scheduling") - layered_names(ROOT / "pyproject.toml")
    assert not missing, f"not on any layer of the layers contract in pyproject.toml: {', '.join(sorted(missing))}"


def test_the_scan_sees_modules_and_packages_but_not_data_or_migrations(tmp_path):
    """The scan itself can fail: a module and a package are found, a data folder and migrations are not, and a
    name the contract lists on a shared layer counts as layered."""
    package = tmp_path / "scheduling"
    for folder in ("engine", "migrations", "demo_data"):
        (package / folder).mkdir(parents=True)
    for name in ("__init__.py", "forms.py", "engine/__init__.py", "migrations/__init__.py", "demo_data/x.csv"):
        (package / name).write_text("")
    assert top_level_names(package) == {"scheduling.forms", "scheduling.engine"}
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[[tool.importlinter.contracts]]\nname = "x"\ntype = "layers"\nlayers = ["scheduling.forms : scheduling.a"]\n'
    )
    assert top_level_names(package) - layered_names(pyproject) == {"scheduling.engine"}
