"""The RL presets users name (``--algo``): each one an advantage estimator (:mod:`clawgym.rl.advantages`) and a
loss aggregation (:mod:`clawgym.rl.losses`), in this one table. A name that is not a preset but a registered
advantage (a third party's) is that advantage with the ``token-mean`` loss."""

from __future__ import annotations

from dataclasses import dataclass

from clawgym.rl.advantages import ADVANTAGES


@dataclass(frozen=True)
class Preset:
    advantage: str
    loss: str


PRESETS: dict[str, Preset] = {
    "grpo": Preset("grpo", "seq-mean-token-mean"),
    "dr-grpo": Preset("dr-grpo", "token-sum-norm"),
    "rloo": Preset("rloo", "token-mean"),
    "reinforce++": Preset("reinforce-pp", "token-mean"),
}
ALGOS = tuple(PRESETS)  # the built-in presets
DEFAULT_LOSS = "token-mean"


def algos() -> list[str]:
    """The names `--algo` offers: the presets, then the registered advantages no preset names (sorted)."""
    used = set(PRESETS) | {p.advantage for p in PRESETS.values()}
    return [*PRESETS, *(n for n in ADVANTAGES.names() if n not in used)]


def resolve_preset(algo: str) -> Preset:
    """The advantage and loss of `algo`; ValueError naming the choices when it is neither a preset nor an
    advantage."""
    if algo in PRESETS:
        return PRESETS[algo]
    if algo in ADVANTAGES:
        return Preset(algo, DEFAULT_LOSS)
    raise ValueError(f"unknown RL preset {algo!r}; choose one of {', '.join(algos())}")
