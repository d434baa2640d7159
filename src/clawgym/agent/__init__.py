"""Agents: the built-in LLM agent, baselines (noop, oracle), their tools and transcripts, and the registry of
agent kinds (clawgym.agent.kind) that `--agent` names."""

from clawgym.agent.base import Agent, AgentOutcome, EpisodeContext
from clawgym.agent.baselines import AGENTS, NoopAgent, OracleAgent, get_agent
from clawgym.agent.kind import (
    AGENT_KINDS,
    AgentKind,
    AgentSession,
    AgentSpec,
    SimpleKind,
    agent_kinds,
    get_kind,
    register_agent_kind,
)
from clawgym.agent.llm import TOOL_SCHEMAS, AgentLimits, LLMAgent
from clawgym.agent.tools import ToolExecutor, ToolOutcome
from clawgym.agent.transcript import TranscriptBuilder

__all__ = [
    "AGENTS", "AGENT_KINDS", "TOOL_SCHEMAS", "Agent", "AgentKind", "AgentLimits", "AgentOutcome", "AgentSession",
    "AgentSpec", "EpisodeContext", "LLMAgent", "NoopAgent", "OracleAgent", "SimpleKind", "ToolExecutor",
    "ToolOutcome", "TranscriptBuilder", "agent_kinds", "get_agent", "get_kind", "register_agent_kind",
]
