"""The sandbox image: one recipe, one root filesystem, used as a bwrap root and as a Docker image.

No registry is needed: the root filesystem is built with `debootstrap` from Debian's package mirror and turned
into a Docker image with `docker import`. Where a registry is reachable, a Dockerfile from a public Python base
image would be the natural path; this recipe works offline from Docker Hub and gives bwrap the very same files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clawgym.core.errors import ClawgymError

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# python-is-python3 and ruby: ClawGym-Bench checkers run `python` (task_0112, task_0119) and `ruby` (task_0199)
# on the agent's work; without them a correct solution loses those checks (docs/evaluation.md).
PACKAGES = [
    "python3", "python3-pytest", "python3-yaml", "python3-openpyxl", "git", "sqlite3", "jq", "curl",
    "ca-certificates", "procps", "file", "unzip", "zip", "xz-utils", "bc", "less", "tree", "ripgrep", "make",
    "gawk", "python-is-python3", "ruby",
]
IMAGE_REPO = "clawgym-sandbox"


class ImageError(ClawgymError):
    pass


def recipe() -> dict:
    return {"suite": SUITE, "variant": "minbase", "packages": PACKAGES, "version": 2}


def recipe_id() -> str:
    return hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()[:12]


def clawgym_home() -> Path:
    env = os.environ.get("CLAWGYM_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "clawgym"


def docker_tag() -> str:
    return f"{IMAGE_REPO}:{recipe_id()}"


@dataclass
class ImageInfo:
    rootfs: Path
    recipe_id: str

    @property
    def docker_tag(self) -> str:
        return f"{IMAGE_REPO}:{self.recipe_id}"


def rootfs_dir() -> Path:
    return clawgym_home() / "images" / recipe_id() / "rootfs"


def find_rootfs() -> Path | None:
    """The built root filesystem of the current recipe, or None. CLAWGYM_ROOTFS overrides."""
    env = os.environ.get("CLAWGYM_ROOTFS")
    if env:
        return Path(env) if (Path(env) / "usr").is_dir() else None
    d = rootfs_dir()
    return d if (d.parent / "recipe.json").exists() and (d / "usr" / "bin").is_dir() else None


def build_rootfs(mirror: str | None = None, force: bool = False, log=print) -> Path:
    """Build the root filesystem with debootstrap (needs root and Debian's mirror). Idempotent."""
    final = rootfs_dir()
    if find_rootfs() == final and not force:
        log(f"rootfs already built: {final}")
        return final
    if os.geteuid() != 0:
        raise ImageError("building the sandbox root filesystem needs root (debootstrap); run as root or with sudo")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed: run `make system-deps` (or apt-get install debootstrap)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="rootfs.", dir=final.parent))
    mirror = mirror or os.environ.get("CLAWGYM_DEBIAN_MIRROR", DEFAULT_MIRROR)
    cmd = [
        "debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(tmp), mirror,
    ]
    log("running: " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise ImageError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
    # byte-compile the python packages: debootstrap leaves most of them without .pyc files, and on a
    # read-only root python would compile them again at every start (pytest's import: 220 ms -> ~60 ms)
    comp = subprocess.run(
        ["chroot", str(tmp), "python3", "-m", "compileall", "-q", "-j", "0",
         "/usr/lib/python3/dist-packages", "/usr/lib/python3.11"],
        capture_output=True, text=True,
    )
    if comp.returncode not in (0, 1):  # 1: some test/lib2to3 grammar files do not compile, which is fine
        shutil.rmtree(tmp, ignore_errors=True)
        raise ImageError(f"byte-compiling the image's python packages failed: {comp.stderr.strip()[-300:]}")
    # the conventional workspace mount points exist in the image, so read-only roots can mount there
    for d in ("workspace", "root/.openclaw/workspace"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp / "var/cache/apt/archives", ignore_errors=True)
    (tmp / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    (tmp / "etc/clawgym-image").write_text(json.dumps(recipe()) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    (final.parent / "recipe.json").write_text(json.dumps({**recipe(), "id": recipe_id()}, indent=2) + "\n")
    log(f"rootfs built: {final}")
    return final


def import_docker_image(client, rootfs: Path | None = None, force: bool = False, log=print) -> str:
    """`docker import` the root filesystem as clawgym-sandbox:<recipe id> (through the Docker API)."""
    import docker.errors

    tag = docker_tag()
    if not force:
        try:
            client.images.get(tag)
            log(f"docker image already present: {tag}")
            return tag
        except docker.errors.ImageNotFound:
            pass
    rootfs = rootfs or find_rootfs()
    if rootfs is None:
        raise ImageError("no root filesystem built yet: run `clawgym sandbox build` first")
    with tempfile.TemporaryDirectory(prefix="clawgym-img-") as td:
        tar_path = Path(td) / "rootfs.tar"
        with tarfile.open(tar_path, "w") as tar:
            for entry in sorted(os.listdir(rootfs)):
                tar.add(rootfs / entry, arcname=entry)
        repo, _, ver = tag.partition(":")
        client.api.import_image(src=str(tar_path), repository=repo, tag=ver)
    client.images.get(tag).tag(IMAGE_REPO, "latest")
    log(f"docker image imported: {tag}")
    return tag
