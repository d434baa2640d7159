"""OpenClaw as a black-box agent: installed once into the cache, run unmodified inside each episode's sandbox,
its model calls through the gateway (unix socket + in-sandbox relay), its SQLite transcript converted for
`grade()` and joined to the gateway's step records."""

from clawgym.agent.openclaw.agent import OpenClawAgent, OpenClawSettings, conversation, join_steps
from clawgym.agent.openclaw.config import (
    GATEWAY_MOUNT,
    INSTALL_MOUNT,
    SOCKET_NAME,
    STATE_MOUNT,
    openclaw_config,
)
from clawgym.agent.openclaw.install import (
    DEFAULT_VERSION,
    Installation,
    InstallError,
    find_installation,
    install_openclaw,
)
from clawgym.agent.openclaw.transcript import OpenClawTranscript, TranscriptReadError, read_transcript

__all__ = [
    "DEFAULT_VERSION", "GATEWAY_MOUNT", "INSTALL_MOUNT", "SOCKET_NAME", "STATE_MOUNT", "InstallError", "Installation",
    "OpenClawAgent", "OpenClawSettings", "OpenClawTranscript", "TranscriptReadError", "conversation",
    "find_installation", "install_openclaw", "join_steps", "openclaw_config", "read_transcript",
]
