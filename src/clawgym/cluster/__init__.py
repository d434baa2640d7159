"""Running rollouts, evaluations, synthesis and RL rollouts on a Ray cluster.

`clawgym.cluster.ray_executor` is the driver's side (connection, node checks, placement by sandbox slots,
failures); `clawgym.cluster.worker` is what runs on a node (an episode attempt, a node's check, synthesis
validation). Ray is an optional dependency (`pip install 'clawgym[ray]'`), imported only by the driver's side.
"""

SLOT_RESOURCE = "clawgym_slots"  # the custom resource a node offers: how many sandboxes it may run at once

__all__ = ["SLOT_RESOURCE"]
