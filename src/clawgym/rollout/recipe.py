"""How a worker on another machine builds the agent of an episode: :class:`AgentRecipe`, defined with the agent
kinds that build from it (clawgym.agent.recipe) and named here, where the executors hand it to their workers."""

from clawgym.agent.recipe import AgentRecipe

__all__ = ["AgentRecipe"]
