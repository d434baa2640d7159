"""Agent kinds: what `--agent NAME` names, behind a registry third parties plug into.

A kind brings everything a rollout needs to run its agent, so that nothing else in clawgym branches on its name:

- its own settings (`settings`: a dataclass of the fields only it has, such as OpenClaw's version and budgets),
  given as ``AgentSpec.settings``, next to the settings every kind shares (:class:`AgentSpec`);
- how it opens a session for a run (`session`): the agent factory of the local threads, with whatever lives
  around it for the run (a model endpoint, the gateway recording the pool, sandbox mounts), and the recipe a
  remote worker builds the agent from (`options.recipe`);
- how a remote worker builds the agent from that recipe (`build`) and the sandbox mounts it needs on that node
  (`mounts`), and the check that the executor's nodes can run it (`check_nodes`);
- for an agent that needs a runtime on the host (OpenClaw: Node.js and its npm package), its `installer()`: what
  `clawgym agents install NAME` runs and `clawgym agents check` reports (:class:`AgentInstaller`).

Built in: ``noop`` and ``oracle`` (clawgym.agent.baselines), ``llm`` (clawgym.agent.llm_kind), ``openclaw``
(clawgym.agent.openclaw.kind). Another distribution declares its own in the ``clawgym.agents`` entry point group::

    [project.entry-points."clawgym.agents"]
    scripted = "my_package.kinds:ScriptedKind"

and `clawgym rollout --agent scripted` runs it; a kind whose agent needs nothing around it subclasses
:class:`SimpleKind` and names its agent class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from clawgym.core.registry import Registry, UnknownPlugin

if TYPE_CHECKING:
    from clawgym.agent.base import Agent
    from clawgym.agent.recipe import AgentRecipe
    from clawgym.core.records import Task

DEFAULT_AGENT_MODEL = "smollm2-135m"


@dataclass(kw_only=True)
class AgentSpec:
    """The agent of a run: its kind (`name`), the settings every model-driven kind shares, and the kind's own
    (`settings`: an instance of the kind's settings class, a dict of its fields, or None for its defaults).
    A kind that calls no model ignores the shared ones."""

    name: str = "noop"  # an agent kind (agent_kinds() lists them)
    model: str = DEFAULT_AGENT_MODEL
    base_url: str | None = None
    max_turns: int = 30
    max_tokens: int = 1024
    max_total_tokens: int | None = None
    temperature: float = 0.0
    llm_concurrency: int = 16
    request_timeout: float = 300.0
    stream: bool = False
    gateway: bool = True
    policy_version: str | None = None
    # the embedded server's precision, when one is started for a local model (see `clawgym serve --precision`)
    precision: str = "fp32"
    # the pool the gateway records into (default RUN_DIR/pool), and prefixes of the trajectory and group ids it
    # records: several runs (the iterations of `train rl`) share one pool without their ids meeting
    pool_dir: Path | None = None
    id_prefix: str = ""
    group_prefix: str | None = None  # None: id_prefix
    seed: int | None = None  # sampling seed of each model call (llm: seed + sample index), for repeatable runs
    # the gateway imposes `temperature` (and, when `seed` is set, a seed per trajectory and call) on every model
    # call, over the parameters the agent chose (openclaw in train rl); off: the agent's own
    impose_sampling: bool = False
    # the tokenizer the gateway re-tokenizes with when the engine returns no token ids (llama.cpp, Ollama, OpenAI):
    # a local model directory or embedded name; None: the model's own when `model` is one, else no ids
    tokenizer: str | None = None
    settings: Any = None  # the kind's own settings (see AgentKind.settings_of)

    @property
    def pool_group_prefix(self) -> str:
        return self.id_prefix if self.group_prefix is None else self.group_prefix


class RunOptions(Protocol):
    """What a kind's session reads and sets of the run's options (a clawgym.rollout.RolloutOptions; the agent
    package sits below the rollout and names only this much of it)."""

    samples: int
    executor: Any  # None or "local": the local threads; another executor runs episodes on its workers
    limits: Any  # the sandboxes' SandboxLimits
    recipe: Any  # set by the session: the AgentRecipe remote workers build the agent from
    mounts: list[Any]  # set by the session: extra sandbox mounts (clawgym.sandbox.base.Mount)
    on_attempt: Callable[[Any], None] | None  # set by the session: called with each finished attempt

    def timeout_of(self, task: Task) -> float: ...


@dataclass
class AgentSession:
    """What a kind's session gives the rollout: the agent factory of its threads, what run.json records about
    the agent (`settings`), and the model client and gateway when there are any."""

    factory: Callable[[], Agent]
    settings: dict[str, Any] = field(default_factory=dict)
    client: Any = None  # the LLMClient, for usage figures
    gateway: Any = None  # the GatewayThread recording the calls, when there is one

    def usage_line(self) -> str | None:
        if self.client is None:
            return None
        u = self.client.usage.as_dict()
        return (f"model calls: {u['requests']} ({u['retries']} retries, {u['failures']} failed attempts), "
                f"tokens: {u['prompt_tokens']} prompt + {u['completion_tokens']} completion")


@dataclass(frozen=True)
class NoSettings:
    """The settings of a kind that has none of its own."""


def settings_data(settings: Any) -> dict[str, Any]:
    """A kind's settings as plain data (for a recipe, run.json, report.json): a dataclass's or pydantic model's
    fields."""
    if is_dataclass(settings) and not isinstance(settings, type):
        return asdict(settings)
    if hasattr(settings, "model_dump"):
        return settings.model_dump(mode="json")
    return dict(settings or {})


@dataclass
class InstallCheck:
    """What `clawgym agents check` shows of one kind: a row per part (``{"part", "ok", "version", "details"}``),
    and whether the kind can run (`ready`: its pinned runtime and what that needs are there and work)."""

    rows: list[dict[str, Any]]
    ready: bool


class AgentInstaller(ABC):
    """The runtime a kind's agent needs on the host, put in place by `clawgym agents install NAME` and reported by
    `clawgym agents check` (a kind's `installer()`; OpenClaw's: clawgym.agent.openclaw.install)."""

    @abstractmethod
    def install(self, version: str | None = None, *, force: bool = False, offline: bool = False,
                npm_cache: Path | None = None, progress: Callable[[str], None] | None = None) -> str:
        """Install `version` (None: the pinned one) unless it is installed already (then only with `force`);
        `offline`: without the network, from a package cache (`npm_cache`, for an installer that uses npm: npm's
        own when None). `progress(line)` is told before a long step. Returns the line `agents install` prints
        (what is installed, where); a ClawgymError when it cannot install."""

    @abstractmethod
    def check(self) -> InstallCheck:
        """What is installed, and whether it works."""


class AgentKind(ABC):
    """One kind of agent (see the module docstring). Subclasses set `settings` and override `session` (and
    `build`, to run on remote workers); `mounts`, `check_nodes` and `node_check` when their agent needs more
    than a sandbox on a node; `installer` when it needs a runtime installed on the host."""

    name: str = ""
    settings: ClassVar[type] = NoSettings  # a dataclass (or pydantic model) of the kind's own fields
    uses_model: ClassVar[bool] = False  # its agent calls AgentSpec.model (a judge of the same model shares it)

    def settings_of(self, spec: AgentSpec) -> Any:
        """`spec.settings` as this kind's settings class; TypeError when they are another kind's."""
        given = spec.settings
        if given is None:
            return self.settings()
        if isinstance(given, self.settings):
            return given
        if isinstance(given, dict):
            known = {f.name for f in fields(self.settings)} if is_dataclass(self.settings) else None
            unknown = sorted(set(given) - known) if known is not None else []
            if unknown:
                raise TypeError(f"agent {self.name!r} has no setting {', '.join(unknown)}")
            return self.settings(**given)
        raise TypeError(f"agent {self.name!r} takes {self.settings.__name__} settings, not {type(given).__name__}")

    @abstractmethod
    def session(self, spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RunOptions,
                announce: Callable[[Any], None] | None = None) -> AbstractContextManager[AgentSession]:
        """A context manager yielding the agent factory for a rollout into `run_dir` (a subclass decorates its
        generator with @contextmanager). Sets `options.recipe` (how a remote worker builds the agent), and may set
        `options.on_attempt` and `options.mounts`."""
        yield  # pragma: no cover

    def build(self, recipe: AgentRecipe) -> Agent:
        """The agent of one remote episode, built on the worker from `recipe` (a kind that runs only locally
        keeps this refusal, and its session sets no recipe)."""
        from clawgym.core.errors import ClawgymError

        raise ClawgymError(f"agent {self.name!r} does not run on remote workers")

    def mounts(self, recipe: AgentRecipe) -> list[Any]:
        """The extra sandbox mounts of a remote episode on this node (clawgym.sandbox.base.Mount)."""
        return []

    def check_nodes(self, executor: Any, spec: AgentSpec) -> dict[str, Any]:
        """Check that the executor's nodes can run this agent (a node that cannot takes no episodes); what each
        usable node has. Called by a session on a remote executor."""
        return {}

    def node_check(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Run on a node: whether this agent, with its recipe's `settings`, can run there
        (``{"ok": bool, "check": why, ...what the node has}``)."""
        return {"ok": True, "check": "ok"}

    def installer(self) -> AgentInstaller | None:
        """What `clawgym agents install NAME` runs and `agents check` reports, for an agent that needs a runtime
        installed on the host; None: nothing to install."""
        return None


class SimpleKind(AgentKind):
    """A kind whose agent needs nothing around it: no model, no gateway, no mounts (noop, oracle, a scripted
    agent). `agent_class()` is the agent, built locally and on remote workers alike; the settings, if the kind
    has some, are given to it as ``agent_class(settings)``."""

    agent_class: ClassVar[Callable[..., Agent]]

    def make_agent(self, settings: Any) -> Agent:
        return self.agent_class() if isinstance(settings, NoSettings) else self.agent_class(settings)

    @contextmanager
    def session(self, spec: AgentSpec, run_dir: Path, tasks: list[Task], options: RunOptions,
                announce: Callable[[Any], None] | None = None) -> Iterator[AgentSession]:
        from clawgym.agent.recipe import AgentRecipe

        settings = self.settings_of(spec)
        options.recipe = AgentRecipe(self.name, settings=settings_data(settings))
        yield AgentSession(lambda: self.make_agent(settings))

    def build(self, recipe: AgentRecipe) -> Agent:
        return self.make_agent(self.settings(**recipe.settings) if recipe.settings else self.settings())


def _check_kind(name: str, obj: Any) -> None:
    if not (isinstance(obj, type) and issubclass(obj, AgentKind)):
        raise TypeError(f"agent kind {name!r} must be an AgentKind subclass, not {obj!r}")


AGENT_KINDS: Registry[type[AgentKind]] = Registry(
    "agent kind", "clawgym.agents",
    builtin={
        "noop": "clawgym.agent.baselines:NoopKind",
        "oracle": "clawgym.agent.baselines:OracleKind",
        "llm": "clawgym.agent.llm_kind:LLMKind",
        "openclaw": "clawgym.agent.openclaw.kind:OpenClawKind",
    },
    check=_check_kind,
)


def register_agent_kind(name: str) -> Callable[[type[AgentKind]], type[AgentKind]]:
    """Class decorator: register an AgentKind subclass under `name` (in this process)."""
    return AGENT_KINDS.register(name)


def agent_kinds() -> list[str]:
    """Every agent kind's name (built in, registered, declared by another distribution), sorted."""
    return AGENT_KINDS.names()


def get_kind(name: str) -> AgentKind:
    """The agent kind named `name`; UnknownPlugin (a ValueError) naming the ones there are."""
    try:
        cls = AGENT_KINDS.get(name)
    except UnknownPlugin:
        raise UnknownPlugin(f"unknown agent {name!r}; choose from {', '.join(agent_kinds())}") from None
    kind = cls()
    kind.name = name  # one class registered under several names knows the one it was asked by
    return kind


def installable_kinds() -> list[str]:
    """The kinds that bring an installer (`clawgym agents install NAME`), sorted. Every kind is loaded to ask."""
    names = []
    for name in agent_kinds():
        try:
            if get_kind(name).installer() is not None:
                names.append(name)
        except Exception:  # noqa: BLE001 - a plug-in that does not load is not installable; asked for by name, it says why
            continue
    return names


def get_installer(name: str) -> AgentInstaller:
    """The installer of the kind named `name`; UnknownPlugin (a ValueError) naming the installable kinds when there
    is no such kind or it has nothing to install."""
    try:
        installer = get_kind(name).installer()
    except UnknownPlugin:
        raise UnknownPlugin(f"unknown agent {name!r}; installable: {', '.join(installable_kinds())}") from None
    if installer is None:
        raise UnknownPlugin(f"agent {name!r} has nothing to install; installable: {', '.join(installable_kinds())}")
    return installer
