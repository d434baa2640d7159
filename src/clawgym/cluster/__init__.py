"""The `ray` executor (registered in :data:`clawgym.rollout.executor.EXECUTORS`): rollouts, evaluations and RL
rollouts on a Ray cluster, and whatever work another package hands over (synthesis validation).

`clawgym.cluster.ray_executor` is the driver's side (connection, node checks, placement by sandbox slots,
failures); `clawgym.cluster.worker` is what runs on a node (an episode attempt, a node's check, a worker actor
running handed-over work named by importable callables). Layer: above rollout (it implements rollout's
Executor), below evaluation, train and synth, which use it only through the registry; it imports nothing of
synth. Ray is an optional dependency (`pip install 'clawgym[ray]'`), imported only by the driver's side.
"""

SLOT_RESOURCE = "clawgym_slots"  # the custom resource a node offers: how many sandboxes it may run at once

__all__ = ["SLOT_RESOURCE"]
