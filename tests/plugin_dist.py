"""A third-party distribution made on the fly for the plug-in tests: its modules and a dist-info declaring entry
points, put on sys.path. Nothing in clawgym is edited or imported for it: the registries find it through its
metadata, as they would an installed package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def install_dist(site: Path, monkeypatch: pytest.MonkeyPatch, dist: str, modules: dict[str, str],
                 entry_points: dict[str, dict[str, str]]) -> Path:
    """Write `modules` ({dotted module name: source}) and `dist`'s dist-info with `entry_points` ({group: {name:
    "module:attr"}}) under `site`, and prepend `site` to sys.path (undone after the test). Returns `site`."""
    for name, source in modules.items():
        parts = name.split(".")
        path = site.joinpath(*parts[:-1])
        path.mkdir(parents=True, exist_ok=True)
        for i in range(1, len(parts)):
            init = site.joinpath(*parts[:i], "__init__.py")
            if not init.exists():
                init.write_text("")
        (path / f"{parts[-1]}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{n} = {target}\n" for n, target in eps.items()) + "\n"
        for group, eps in entry_points.items()))
    monkeypatch.syspath_prepend(str(site))
    # a module of the same name left by an earlier test (another site) must not stand in for this one; sys.modules
    # itself is not replaced (modules imported for the first time during the test must stay importable after it)
    top = {m.split(".")[0] for m in modules}
    for name in list(sys.modules):
        if name.split(".")[0] in top:
            monkeypatch.delitem(sys.modules, name)
    return site
