"""RL algorithms as plug-ins: advantage estimators (`advantages.py`, ``@register_advantage``), loss aggregations
(`losses.py`, ``@register_loss``) and the presets users name (`presets.py`: ``--algo grpo`` is the ``grpo``
advantage with the ``seq-mean-token-mean`` loss). A third party adds an advantage or a loss by registering it, or
by declaring it in the ``clawgym.rl_advantages`` / ``clawgym.rl_losses`` entry point groups; nothing in clawgym
is edited. Nothing here imports torch.
"""

from clawgym.rl.advantages import ADVANTAGES, Advantage, get_advantage, register_advantage
from clawgym.rl.losses import LOSSES, get_loss, register_loss
from clawgym.rl.presets import ALGOS, PRESETS, Preset, algos, resolve_preset

__all__ = ["ADVANTAGES", "ALGOS", "LOSSES", "PRESETS", "Advantage", "Preset", "algos", "get_advantage", "get_loss",
           "register_advantage", "register_loss", "resolve_preset"]
