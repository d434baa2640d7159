"""`clawgym train rl`: the online loop. Serve policy version v, roll out k samples per task through the gateway
into one pool, build the batch from the pool's step rows (curation respected), update a LoRA adapter on the
engine's own token ids, publish version v + 1 to the running server without restarting it, and go on.

The output directory holds:

* `state.json`: the last published version, its adapter, and how many times each iteration was started;
* `pool/`: every model call of every iteration (trajectory ids `v<N>.r<R>.<task>#<sample>`, groups
  `v<N>.<task>`, steps stamped `policy_version = N`); R counts the starts of iteration N, so the steps of an
  episode cut short by a kill never join the trajectory that reran it, while the episodes that ended before the
  kill and those run after it form one group;
* `rollouts/v<N>/`: each iteration's rollout (trajectories, logs, workspaces), resumable;
* `batches/v<N>.jsonl`: the rows the update of iteration N trained on (`pool export --format rl` rows);
* `adapters/v<N>/`: the adapter of policy version N (peft format, with the optimizer's state); with `--full`,
  `weights/v<N>/` instead: the whole model (safetensors and tokenizer; the last two versions are kept);
* `metrics.jsonl` and `metrics.png`: one row per iteration (rewards, pass rate, per operation family, the
  update's statistics, staleness, tokens/s and the wall time of each phase).

Versions are published by `POST /v1/load_lora_adapter` (vLLM's route, also served by `clawgym serve`): adapter
`policy-v<N>` is then the `model` of the next rollouts. With `--full` every weight is trained and a version is
published by `POST /update_weights_from_disk` (SGLang's route and body, also served by `clawgym serve`) or by
vLLM's `POST /collective_rpc` `reload_weights` (`weights_route`, :meth:`PolicyServer.publish_full`): the
server swaps its base weights in place once its running requests are done, and the model keeps its name.
Adam's moments are not saved with full weights (they would triple each version's size): a resumed `--full` run
starts them afresh. Resume: after a kill at any point, the same command
reloads the last published adapter and optimizer state, publishes it again, and continues; an iteration's
rollout resumes where it stopped; a version is published (its adapter saved, `state.json` replaced) before
the server learns of it, so no published version is lost or made twice.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_lines, write_text
from clawgym.core.errors import ClawgymError
from clawgym.core.records import Task

ADAPTER_PREFIX = "policy-v"
WEIGHTS_ROUTES = ("auto", "sglang", "vllm")
"""How full weights reach the engine (:meth:`PolicyServer.publish_full`)."""


class RLError(ClawgymError):
    """The RL loop cannot go on (bad options, a server that refuses the adapter)."""


@dataclass
class RLOptions:
    """Settings of `clawgym train rl` (each one a CLI option of the same name)."""

    model: str = "smollm2-135m"  # the base model: an embedded name or a model directory
    base_url: str | None = None  # an OpenAI-compatible engine with LoRA enabled (vLLM); None: the embedded server
    samples: int = 4  # k per task
    tasks_per_iter: int = 8
    iterations: int = 1
    temperature: float = 1.0
    max_turns: int = 4
    max_tokens: int = 256
    algo: str = "grpo"
    credit: str = "outcome"
    progress: bool = False  # record progress rewards (clawgym.verify.progress); always with credit progress, gae
    gamma: float = 1.0
    # --credit gae (clawgym.train.value_head): GAE's lambda, and the value head's fit each update (Adam, full batch)
    gae_lambda: float = 0.95
    value_lr: float = 1e-2
    value_steps: int = 200
    kl_coef: float = 0.0
    clip: float = 0.2
    lr: float = 1e-4
    lora_r: int = 16
    lora_alpha: int | None = None
    epochs: int = 1  # passes over each batch
    max_staleness: int = 0  # versions a trained step may lag behind the policy being updated
    micro_batch_tokens: int = 4096
    seed: int = 0
    jobs: int = 4
    sandbox: str = "auto"
    episode_timeout: float | None = None
    precision: str = "fp32"
    full: bool = False  # every weight instead of a LoRA adapter (published as full weights)
    # a LoRA adapter of `model` to start from (e.g. the SFT student's, not merged): policy v0 is the model with it,
    # served as an adapter (so a q4 server keeps the base's 4-bit blocks), and RL trains it further
    init_adapter: str | None = None
    executor: Any = None  # where the rollout phase runs: an entered clawgym.rollout.executor.Executor (None: local)
    agent: str = "llm"  # who makes the rollouts: llm (the built-in agent) or openclaw (the black-box agent)
    train_precision: str = "fp32"  # the update's forward passes: fp32, bf16 (autocast; fp32 weights and loss), auto
    share_prefixes: bool = True  # run the tokens a micro-batch's rows share once (exact; see train.prefix_tree)
    device: str = "auto"  # where the update runs: auto (a CUDA GPU when torch sees one, else the CPU), cpu, cuda[:N]
    # the update at scale (clawgym.train.rl_update): optimizer steps per pass over a batch (PPO mini-batches)
    mini_batches: int = 1
    lr_schedule: str = "constant"  # constant | linear | cosine over the run's steps (clawgym.train.rl_schedule)
    warmup_steps: int = 0
    max_grad_norm: float | None = 1.0  # each step's gradient clipped to this norm; None: not clipped
    dtype: str = "fp32"  # auto | bf16 | fp32: the policy's weights in the update (clawgym.train.dtypes)
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (less memory, same gradient)
    # under torchrun: shard the policy, its gradients and Adam's state across the processes (FSDP2, ZeRO-3's
    # partitioning; clawgym.train.rl_update.shard_policy) instead of each process holding all of them
    fsdp: bool = False
    report_to: str = "none"  # none | tensorboard | wandb, besides metrics.jsonl (clawgym.train.rl_report)
    # one-step asynchronous rollouts: iteration v + 1's episodes are made by policy v while v's update runs (needs
    # max_staleness >= 1 to train on them)
    async_rollouts: bool = False
    weights_route: str = "auto"  # how --full publishes a version: auto, sglang or vllm (PolicyServer.publish_full)
    # the rubric judge (a clawgym.verify.Judge, kept open by the caller): episodes of tasks with a rubric are judged
    # as they end and rewarded with the hybrid score (0.7 code + 0.3 rubric by default); None: code checks only
    judge: Any = None


@dataclass
class RLState:
    version: int = 0  # the published policy version (0: the initial policy, no adapter)
    starts: dict[str, int] = field(default_factory=dict)  # iteration -> times it was started
    trained_groups: list[str] = field(default_factory=list)
    optimizer_steps: int = 0  # taken so far (the LR schedule's position on resume)

    @classmethod
    def load(cls, path: Path) -> RLState:
        if not path.exists():
            return cls()
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise RLError(f"{path}: not a state file of `clawgym train rl` ({exc})") from None

    def save(self, path: Path) -> None:
        write_text(path, json.dumps(asdict(self), indent=2) + "\n")


def adapter_name(version: int) -> str:
    return f"{ADAPTER_PREFIX}{version}"


def tasks_of_iteration(tasks: list[Task], n: int, iteration: int, seed: int) -> list[Task]:
    """The tasks of one iteration: a fixed shuffle of the task list (by `seed`), taken `n` at a time, wrapping
    around; the same for every rerun."""
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    start = (iteration * n) % len(order)
    picked = [order[(start + i) % len(order)] for i in range(min(n, len(order)))]
    return [tasks[i] for i in picked]


def select_rows(rows: list[dict[str, Any]], version: int, max_staleness: int,
                trained: set[str]) -> tuple[list[dict[str, Any]], Counter]:
    """The batch of the update of `version` from exported rows: steps of groups not trained on yet whose policy
    version lags at most `max_staleness`; returns the rows and the count of the others, by reason."""
    keep, dropped = [], Counter()
    for r in rows:
        if r["group_id"] in trained:
            dropped["group already trained on"] += 1
            continue
        try:
            lag = version - int(r.get("policy_version"))
        except (TypeError, ValueError):
            dropped["no policy version"] += 1
            continue
        if lag > max_staleness or lag < 0:
            dropped[f"staleness {lag}"] += 1
            continue
        r["staleness"] = lag
        keep.append(r)
    return keep, dropped


class PolicyServer:
    """Where the policy is served: the embedded server (started here) or a given engine; publishes adapters with
    vLLM's `load_lora_adapter` / `unload_lora_adapter`."""

    def __init__(self, model: str, base_url: str | None, log_path: Path, precision: str, weights_route: str = "auto"):
        if weights_route not in WEIGHTS_ROUTES:
            raise RLError(f"weights route {weights_route!r}: choose one of {', '.join(WEIGHTS_ROUTES)}")
        self.model = model
        self._given = base_url
        self._proc = None
        self._log = log_path
        self._precision = precision
        self.weights_route = weights_route
        self.base_url = base_url or ""

    def __enter__(self) -> PolicyServer:
        if self._given is None:
            from clawgym.serve.server import ServerProcess

            self._proc = ServerProcess(self.model, log_path=self._log, precision=self._precision).start()
            self.base_url = self._proc.base_url
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.stop()

    def _post(self, route: str, body: dict[str, Any]) -> tuple[int, str]:
        return self._root_post(f"v1/{route}", body, timeout=600)

    def publish(self, name: str, path: Path) -> None:
        code, text = self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        if code != 200 and "already" not in text:
            raise RLError(f"the server refused adapter {name} ({code}): {text[:300]}")

    def retire(self, name: str) -> None:
        self._post("unload_lora_adapter", {"lora_name": name})

    def _root_post(self, route: str, body: dict[str, Any] | None, timeout: float = 1800) -> tuple[int, str]:
        import httpx

        root = self.base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        res = httpx.post(f"{root}/{route}", json=body, timeout=timeout)
        return res.status_code, res.text

    def publish_full(self, path: Path) -> None:
        """Full weights from the model directory `path`, by the engine's own route: SGLang's `POST
        /update_weights_from_disk` `{"model_path"}` (served by `clawgym serve` too), or vLLM's `POST /collective_rpc`
        `{"method": "reload_weights", "kwargs": {"weights_path"}}` (vLLM's dev mode, `VLLM_SERVER_DEV_MODE=1`) between
        `/pause` and `/resume`, with its prefix cache reset (keys and values of the old weights must not be reused).
        `auto` tries SGLang's route and takes vLLM's where the server has no such route (404)."""
        if self.weights_route in ("auto", "sglang"):
            code, text = self._root_post("update_weights_from_disk", {"model_path": str(path)})
            if code == 200:
                return
            if not (code == 404 and self.weights_route == "auto"):
                raise RLError(f"the server refused the weights of {path} ({code}): {text[:300]}")
        self._root_post("pause", None, timeout=600)  # absent on older vLLM (404): its reload waits by itself
        try:
            code, text = self._root_post("collective_rpc", {"method": "reload_weights",
                                                             "kwargs": {"weights_path": str(path)}})
            if code == 200:
                self._root_post("reset_prefix_cache", None, timeout=600)
        finally:
            self._root_post("resume", None, timeout=600)
        if code != 200:
            raise RLError(f"the server refused the weights of {path} through vLLM's /collective_rpc reload_weights "
                          f"({code}): {text[:300]} (vLLM serves that route with VLLM_SERVER_DEV_MODE=1)")


def train_device(name: str) -> str:
    """The torch device of the update for `--device` (`auto`: the first CUDA GPU when torch sees one, else the
    CPU); a GPU asked for that torch cannot see is an error before anything is loaded."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return "cpu"
    if re.fullmatch(r"cuda(:\d+)?", name):
        if not torch.cuda.is_available():
            raise RLError(f"--device {name}: torch sees no CUDA GPU here (torch {torch.__version__}); use cpu or auto")
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise RLError(f"--device {name}: torch sees {torch.cuda.device_count()} CUDA GPU(s)")
        return name
    raise RLError(f"--device {name!r}: choose auto, cpu, cuda or cuda:N")


def _trainable_model(opts: RLOptions, adapter: Path | None, device: str = "cpu"):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clawgym.llm.models import resolve_model_dir

    path = resolve_model_dir(opts.model)
    tok = AutoTokenizer.from_pretrained(str(path))
    if opts.full:  # every weight; `adapter` is then the last published version's model directory
        from clawgym.train.sft import load_base_config

        src = adapter or path
        model = AutoModelForCausalLM.from_pretrained(str(src), config=load_base_config(src), dtype=_weights_dtype(opts))
        model.to(device)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=opts.lr)
        return tok, model, opt
    # a bf16 base keeps its LoRA adapter in fp32 (peft's autocast_adapter_dtype): fp32 master weights
    base = AutoModelForCausalLM.from_pretrained(str(path), dtype=_weights_dtype(opts)).to(device)
    start = adapter or (Path(opts.init_adapter) if opts.init_adapter else None)
    if start is not None:
        model = PeftModel.from_pretrained(base, str(start), is_trainable=True)
    else:
        cfg = LoraConfig(r=opts.lora_r, lora_alpha=opts.lora_alpha or 2 * opts.lora_r, lora_dropout=0.0,
                         target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                         task_type="CAUSAL_LM")
        model = get_peft_model(base, cfg)
    model.to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=opts.lr)
    if adapter is not None and (adapter / "optimizer.pt").exists():
        # saved on whatever device the last update ran on; load_state_dict moves it to the parameters' device
        opt.load_state_dict(torch.load(adapter / "optimizer.pt", weights_only=True, map_location="cpu"))
    return tok, model, opt


def _weights_dtype(opts: RLOptions) -> Any:
    """The torch dtype of `opts.dtype` (auto: bf16 on a CUDA GPU with it, else fp32; see clawgym.train.dtypes)."""
    from clawgym.train.dtypes import resolve_dtype, torch_dtype

    return torch_dtype(resolve_dtype(opts.dtype))


def _check_update_options(opts: RLOptions) -> None:
    """The update's settings (dtype, report_to, LR schedule, mini-batches), checked before anything loads."""
    import os

    from clawgym.train.dtypes import check_dtype
    from clawgym.train.reporting import check_report_to
    from clawgym.train.rl_schedule import LRSchedule

    try:
        check_dtype(opts.dtype)
        check_report_to(opts.report_to)
        LRSchedule(opts.lr, opts.lr_schedule, opts.warmup_steps)
        if opts.mini_batches < 1:
            raise ValueError(f"mini_batches {opts.mini_batches}: at least 1")
        if opts.fsdp and int(os.environ.get("WORLD_SIZE", "1")) < 2:
            raise ValueError("--fsdp shards the update across processes: run it under torchrun with 2 or more "
                             "(torchrun --nproc_per_node N -m clawgym ...)")
        if opts.credit == "gae" and opts.fsdp:
            raise ValueError("--credit gae with --fsdp: the values are computed on rank 0 alone, which a sharded "
                             "policy cannot do; leave out --fsdp (plain multi-process updates work)")
        if not 0.0 <= opts.gae_lambda <= 1.0 or opts.value_steps < 0 or opts.value_lr <= 0:
            raise ValueError(f"--gae-lambda {opts.gae_lambda} (in [0, 1]), --value-steps {opts.value_steps} (>= 0), "
                             f"--value-lr {opts.value_lr} (> 0)")
        if opts.async_rollouts and opts.max_staleness < 1:
            raise ValueError("async rollouts train on episodes of the policy before the one being updated: they "
                             "need --max-staleness 1 or more")
    except (ValueError, ClawgymError) as exc:
        raise RLError(str(exc)) from None


def _save_adapter(model: Any, opt: Any, dest: Path, gathered: Any = None, value_head: Any = None) -> None:
    """Save atomically: written to a temp dir beside `dest`, renamed into place. `gathered`: a sharded policy's
    (adapter weights, optimizer state), gathered to this process (clawgym.train.rl_update.gather_state);
    `value_head`: --credit gae's critic, saved with the version (clawgym.train.value_head)."""
    import shutil

    import torch

    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), **({"state_dict": gathered[0]} if gathered else {}))
    torch.save(gathered[1] if gathered else opt.state_dict(), tmp / "optimizer.pt")
    if value_head is not None:
        value_head.save(tmp)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)


def _save_full(model: Any, tok: Any, dest: Path, keep: int = 2, gathered: Any = None, value_head: Any = None) -> None:
    """Save the whole model atomically (temp dir, rename), then remove all but the last `keep` versions.
    `gathered`, `value_head`: see :func:`_save_adapter`."""
    import shutil

    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), **({"state_dict": gathered[0]} if gathered else {}))
    tok.save_pretrained(str(tmp))
    if value_head is not None:
        value_head.save(tmp)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    versions = sorted((int(d.name[1:]), d) for d in dest.parent.glob("v*") if d.name[1:].isdigit())
    for _, d in versions[:-keep]:
        shutil.rmtree(d, ignore_errors=True)


def _reference_model(opts: RLOptions, model_dir: Path | None, device: str = "cpu") -> Any:
    """The initial policy for the KL term of a full update (a LoRA update disables its adapter instead)."""
    if not (opts.full and opts.kl_coef > 0):
        return None
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.sft import load_base_config

    src = model_dir or resolve_model_dir(opts.model)
    ref = AutoModelForCausalLM.from_pretrained(str(src), config=load_base_config(src), dtype=_weights_dtype(opts))
    ref.to(device)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def drop_superseded(pool: Any, version: int) -> int:
    """Mark not trainable the pool trajectories of iteration `version` that a rerun superseded: an episode may
    have ended in the pool and been cut off by a kill before the run recorded it, then run again under the next
    start's prefix. Per episode only its latest start (and attempt) stays, so no episode counts twice in a group.
    Returns how many were marked."""
    latest: dict[str, tuple[tuple[int, int], str]] = {}
    dropped = 0
    pat = re.compile(rf"v{version}\.r(\d+)\.(.+?)(?:~(\d+))?$")
    for t in pool.trajectories(ended=True, trainable=True):
        m = pat.match(t["id"])
        if m is None:
            continue
        key, rank = m.group(2), (int(m.group(1)), int(m.group(3) or 1))
        best = latest.get(key)
        if best is None or rank > best[0]:
            if best is not None:
                pool.curate(trajectory_id=best[1], trainable=False, note="superseded by a rerun", by="train-rl")
                dropped += 1
            latest[key] = (rank, t["id"])
        else:
            pool.curate(trajectory_id=t["id"], trainable=False, note="superseded by a rerun", by="train-rl")
            dropped += 1
    return dropped


def _chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["version"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    axes[0].plot(xs, [r["mean_reward"] for r in rows], marker="o", label="mean reward")
    axes[0].plot(xs, [r["pass_rate"] for r in rows], marker="s", label="pass rate")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=8)
    axes[1].plot(xs, [r.get("kl", 0.0) for r in rows], marker="o", label="KL")
    axes[1].plot(xs, [r.get("clip_fraction", 0.0) for r in rows], marker="s", label="clip fraction")
    axes[1].legend(fontsize=8)
    axes[2].plot(xs, [r.get("entropy", 0.0) for r in rows], marker="o", label="entropy")
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("policy version rolled out")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


@dataclass
class _Rollout:
    iteration: int
    policy: int  # the version of the policy that made the episodes (their steps' policy_version)
    report: Any
    usage: dict[str, Any]
    seconds: float
    run_dir: Path


class _Served:
    """The policy versions the server holds: the base model, and the adapters published to it (with `full`, the
    one version whose weights it serves). A version is published when a rollout needs it (after a resume: the
    current one, and with async rollouts the one before), and a new one when it is made, retiring the adapter it
    replaces (no later rollout uses it: with async rollouts the next iteration's episodes are already made)."""

    def __init__(self, server: PolicyServer, opts: RLOptions, adapter_dir: Path, fresh: bool):
        self.server, self.full, self.dir, self.model = server, opts.full, adapter_dir, opts.model
        self.init_adapter = opts.init_adapter  # version 0 is this adapter on the base model
        # a server started here serves the base model; a given one, with full weights, may serve anything
        self.loaded: set[int] = {0} if (fresh or not opts.full) and not self.init_adapter else set()

    def ensure(self, version: int) -> None:
        if version in self.loaded:
            return
        if self.full:
            if version == 0:
                from clawgym.llm.models import resolve_model_dir

                self.server.publish_full(resolve_model_dir(self.model))
            else:
                self.server.publish_full(self.dir / f"v{version}")
            self.loaded = {version}
        elif version > 0 or self.init_adapter:  # version 0 without a starting adapter is the base model itself
            path = Path(self.init_adapter) if version == 0 else self.dir / f"v{version}"
            self.server.publish(adapter_name(version), path)
            self.loaded.add(version)

    def publish(self, version: int) -> None:
        """Publish the version just made and retire the adapters of older ones."""
        self.ensure(version)
        if not self.full:
            first = 0 if self.init_adapter else 1  # version 0 is an adapter too when RL started from one
            for old in sorted(v for v in self.loaded if first <= v < version):
                self.server.retire(adapter_name(old))
                self.loaded.discard(old)


def _behaviour_version(iteration: int, opts: RLOptions) -> int:
    """The policy version that makes iteration `iteration`'s episodes: the one published before it (sync), or,
    with `async_rollouts`, the one before that (iteration n is rolled out by policy n - 1 while policy n is being
    trained; iteration 0 by the initial policy). Fixed by the iteration, so a resumed run rolls out the same way."""
    return max(0, iteration - 1) if opts.async_rollouts else iteration


def _overlapped(update: Callable[[], Any], roll_next: Callable[[], _Rollout]) -> tuple[Any, _Rollout]:
    """Run `update` in a thread while `roll_next` runs here (the rollout keeps the main thread: it owns the
    sandboxes and turns SIGTERM into a clean stop); both results, or the first error (after both ended)."""
    import threading

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["update"] = update()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the main thread below)
            box["error"] = exc

    worker = threading.Thread(target=work, name="rl-update", daemon=True)
    worker.start()
    try:
        nxt = roll_next()
    finally:
        worker.join()
    if "error" in box:
        raise box["error"]
    return box["update"], nxt


def _reward_summary(trajs: list[Any], tasks: dict[str, Task]) -> dict[str, Any]:
    scored = [t for t in trajs if t.score is not None]
    by_op: dict[str, list[float]] = {}
    for t in scored:
        task = tasks.get(t.task_id)
        for op in (task.operations if task is not None and task.operations else ["(none)"]):
            by_op.setdefault(op, []).append(t.score)
    return {
        "episodes": len(trajs), "scored": len(scored),
        "mean_reward": sum(t.score for t in scored) / len(scored) if scored else 0.0,
        "pass_rate": sum(1 for t in scored if t.verdict and t.verdict.passed) / len(scored) if scored else 0.0,
        "per_operation": {op: round(sum(v) / len(v), 4) for op, v in sorted(by_op.items())},
        "statuses": dict(Counter(t.status for t in trajs)),
    }


PROCESS_TIMEOUT_S = 24 * 3600.0
"""How long the other processes of a multi-process `train rl` may wait for rank 0 (through a whole rollout)."""


def run_rl(tasks: list[Task], out: Path, opts: RLOptions, *, backend: Any,
           on_event: Callable[[str, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run (or resume) the loop; return the metrics rows of the iterations run now.

    Under `torchrun` (WORLD_SIZE > 1) the update runs in every process (:func:`clawgym.train.rl_update.rl_update`:
    each its share of the micro-batches, gradients summed) while rank 0 alone serves, rolls out, saves and
    publishes: it sends each batch's rows to the others before the update, and a stop when it ends. The output
    directory must be one filesystem for all of them (the others load the current adapter from it). The other
    processes return []."""
    if not tasks:
        raise RLError("no tasks to train on")
    if opts.init_adapter:
        if opts.full:
            raise RLError("--init-adapter starts a LoRA adapter; --full trains every weight (merge the adapter first: "
                          "`clawgym train export`)")
        if opts.kl_coef > 0:
            raise RLError("--init-adapter with --kl-coef: the KL reference is the model with its adapter switched "
                          "off, which would be the base without the starting adapter; use --kl-coef 0")
        if not (Path(opts.init_adapter) / "adapter_config.json").is_file():
            raise RLError(f"--init-adapter {opts.init_adapter}: no adapter_config.json there (a LoRA adapter "
                          "directory, e.g. the final/ of `clawgym train sft`)")
    if opts.full and opts.precision == "q4":
        raise RLError("--full with --precision q4: fully trained weights leave the 4-bit grid q4 decodes from; "
                      "use fp32 or bf16")
    _check_update_options(opts)
    from clawgym.train.rl_update import process_world
    from clawgym.train.rl_update_run import start_processes

    started, device = start_processes(train_device(opts.device), timeout_s=PROCESS_TIMEOUT_S)
    try:
        if process_world()[0] != 0:
            _follow_updates(opts, device)
            return []
        return _lead(tasks, out, opts, backend=backend, on_event=on_event, device=device)
    finally:
        if started:
            import torch.distributed as dist

            dist.destroy_process_group()


def _send(message: Any) -> Any:
    """Rank 0's message to the other processes (a no-op in one process); what rank 0 sent, in every process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return message
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _update_setup(opts: RLOptions, adapter: Path | None, device: str) -> tuple[Any, ...]:
    """(tokenizer, policy, optimizer, reference model, objective, LR schedule, train precision), the same in
    every process (rank 0's trainable weights broadcast to the others)."""
    import torch

    from clawgym.core.precision import resolve_precision
    from clawgym.train.rl_objective import ObjectiveConfig
    from clawgym.train.rl_schedule import LRSchedule
    from clawgym.train.rl_update import broadcast_trainable, shard_policy

    torch.manual_seed(opts.seed)
    tok, model, opt = _trainable_model(opts, adapter, device)
    broadcast_trainable(model)
    ref_model = _reference_model(opts, None, device)
    if opts.fsdp:
        opt = shard_policy(model, opt, ref_model)
    cfg = ObjectiveConfig(algo=opts.algo, clip_low=opts.clip, clip_high=opts.clip, kl_coef=opts.kl_coef,
                          max_response_len=opts.max_tokens)
    schedule = LRSchedule(opts.lr, opts.lr_schedule, opts.warmup_steps,
                          max(1, opts.iterations * max(1, opts.epochs) * opts.mini_batches))
    return tok, model, opt, ref_model, cfg, schedule, resolve_precision(opts.train_precision)


def _update_fn(opts: RLOptions, setup: tuple[Any, ...]) -> Callable[[list[dict[str, Any]], int], Any]:
    """The update of one batch (rows, the run's optimizer steps so far), as every process runs it (sharded, the
    weights to publish are then gathered to rank 0: `published` of the result)."""
    from clawgym.train.rl_update import gather_state, rl_update

    tok, model, opt, ref_model, cfg, schedule, train_precision = setup

    def update(rows: list[dict[str, Any]], first_step: int) -> Any:
        upd = rl_update(model, opt, rows, cfg, epochs=opts.epochs, micro_batch_tokens=opts.micro_batch_tokens,
                        pad_id=tok.pad_token_id or 0, ref_model=ref_model, precision=train_precision,
                        share_prefixes=opts.share_prefixes, mini_batches=opts.mini_batches,
                        lr_schedule=schedule, first_step=first_step, max_grad_norm=opts.max_grad_norm,
                        gradient_checkpointing=opts.gradient_checkpointing)
        if opts.fsdp:
            upd.published = gather_state(model, None if opts.full else opt, trainable_only=not opts.full)
        return upd

    return update


def _follow_updates(opts: RLOptions, device: str) -> None:
    """A process other than rank 0: load the policy rank 0 names, then take part in each update it announces."""
    start = _send(None)
    update = _update_fn(opts, _update_setup(opts, Path(start) if start else None, device))
    while (msg := _send(None)) is not None:
        update(msg["rows"], msg["first_step"])


def _lead(tasks: list[Task], out: Path, opts: RLOptions, *, backend: Any,  # noqa: PLR0915 (the loop of one run: resume, serve, roll out, update, publish, record, in that order)
          on_event: Callable[[str, dict[str, Any]], None] | None, device: str) -> list[dict[str, Any]]:
    from clawgym.pool import Pool, export_rl
    from clawgym.rollout import RolloutOptions, run_rollout
    from clawgym.rollout.setup import AgentSpec, agent_session
    from clawgym.train.rl_report import MetricsReport

    emit = on_event or (lambda kind, data: None)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "state.json"
    state = RLState.load(state_path)
    adapter_dir = out / ("weights" if opts.full else "adapters")
    current = adapter_dir / f"v{state.version}" if state.version > 0 else None
    _send(str(current) if current else None)
    try:
        setup = _update_setup(opts, current, device)
        tok, model, opt = setup[:3]
        update_fn = _update_fn(opts, setup)
        value_head = None
        if opts.credit == "gae":  # the critic: saved with each version, so a resumed run continues it
            from clawgym.train.value_head import ValueHead

            value_head = ValueHead.load_or_new(current, model.config.hidden_size)
        by_id = {t.id: t for t in tasks}
        ran: list[dict[str, Any]] = []
        (out / "logs").mkdir(exist_ok=True)
        with PolicyServer(opts.model, opts.base_url, out / "logs" / "server.log", opts.precision,
                          opts.weights_route) as server, \
                MetricsReport(out, opts.report_to, vars(opts)) as metrics_report:
            served_versions = _Served(server, opts, adapter_dir, fresh=opts.base_url is None)

            def roll_out(n: int) -> _Rollout:
                """Iteration n's rollout: its tasks x k samples by the policy that makes them (`_behaviour_version`),
                its steps stamped with that policy's version; a new start of the iteration (see the module doc)."""
                key = str(n)
                state.starts[key] = state.starts.get(key, 0) + 1
                state.save(state_path)
                prefix = f"v{n}.r{state.starts[key]}."
                b = _behaviour_version(n, opts)
                served_versions.ensure(b)  # a resumed run publishes the policy again (and with async, the one before)
                served = adapter_name(b) if (b > 0 or opts.init_adapter) and not opts.full else opts.model
                it_tasks = tasks_of_iteration(tasks, opts.tasks_per_iter, n, opts.seed)
                emit("rollout", {"version": n, "tasks": len(it_tasks), "samples": opts.samples, "policy": b})
                t0 = time.monotonic()
                # impose_sampling: a black-box agent's calls get the run's temperature and seeds from the gateway
                spec = AgentSpec(name=opts.agent, model=served, base_url=server.base_url, max_turns=opts.max_turns,
                                 max_tokens=opts.max_tokens, temperature=opts.temperature, policy_version=str(b),
                                 pool_dir=out / "pool", id_prefix=prefix, group_prefix=f"v{n}.",
                                 precision=opts.precision, seed=opts.seed * 1_000_003 + n * 1009, impose_sampling=True)
                ropts = RolloutOptions(samples=opts.samples, jobs=opts.jobs, episode_timeout=opts.episode_timeout,
                                       executor=opts.executor, progress=opts.progress or opts.credit in ("progress", "gae"),
                                       judge=opts.judge)
                run_dir = out / "rollouts" / f"v{n}"
                with agent_session(spec, run_dir, it_tasks, ropts) as session:
                    report = run_rollout(it_tasks, session.factory, backend, run_dir, ropts,
                                         settings={**session.settings, "rl_version": n})
                    usage = session.client.usage.as_dict() if session.client is not None else {
                        # a black-box agent's calls (openclaw) were made by its own client: count them from the episodes
                        "completion_tokens": sum(int((t.usage or {}).get("completion_tokens", 0) or 0)
                                                 for t in report.all)}
                done = _Rollout(n, b, report, usage, time.monotonic() - t0, run_dir)
                emit("rolled_out", {"version": n, **_reward_summary(report.all, by_id)})
                return done

            ahead: _Rollout | None = None  # the next iteration's rollout, made while the last update ran
            while state.version < opts.iterations:
                v = state.version
                rolled = ahead if ahead is not None and ahead.iteration == v else roll_out(v)
                ahead = None
                report, usage, t_roll, run_dir = rolled.report, rolled.usage, rolled.seconds, rolled.run_dir
                summary = _reward_summary(report.all, by_id)

                t1 = time.monotonic()
                batch_path = out / "batches" / f"v{v}.jsonl"
                batch_path.parent.mkdir(exist_ok=True)
                export_path = batch_path.with_name(f".v{v}.export.jsonl")
                with Pool(out / "pool") as pool:
                    superseded = drop_superseded(pool, v)
                    exported = export_rl(pool, export_path, algo=opts.algo, credit=opts.credit, gamma=opts.gamma)
                rows = [json.loads(line) for line in export_path.read_text().splitlines()]
                export_path.unlink()
                this_iter = {r["group_id"] for r in rows if r["group_id"].startswith(f"v{v}.")}
                rows, skipped = select_rows(rows, v, opts.max_staleness, set(state.trained_groups))
                critic: dict[str, Any] = {}
                if value_head is not None and rows:  # the advantages from the values of the policy before the update
                    from clawgym.train.value_head import fill_gae

                    try:
                        critic = fill_gae(rows, model, value_head, gamma=opts.gamma, lam=opts.gae_lambda,
                                          device=device, precision=setup[6], value_lr=opts.value_lr,
                                          value_steps=opts.value_steps)
                    except ValueError as exc:
                        raise RLError(f"iteration {v}: {exc}") from None
                write_lines(batch_path, (json.dumps(r) + "\n" for r in rows))
                if not rows:
                    raise RLError(f"iteration {v}: no step to train on (episodes: {summary['statuses']}; export dropped "
                                  f"{exported.get('dropped', {})}); see {run_dir / 'logs' / 'run.log'}")
                emit("update", {"version": v, "rows": len(rows)})

                _send({"rows": rows, "first_step": state.optimizer_steps})  # the other processes update with this one

                def update(rows=rows):
                    return update_fn(rows, state.optimizer_steps)

                if opts.async_rollouts and v + 1 < opts.iterations:
                    # one step off-policy: the next iteration's episodes are made by this policy while it is updated;
                    # nothing is saved or published until both are done, so a kill leaves the state of a sync run
                    upd, ahead = _overlapped(update, lambda n=v + 1: roll_out(n))
                else:
                    upd = update()
                t_train = time.monotonic() - t1

                t2 = time.monotonic()
                new = v + 1
                dest = adapter_dir / f"v{new}"
                dest.parent.mkdir(exist_ok=True)
                if opts.full:
                    _save_full(model, tok, dest, gathered=upd.published, value_head=value_head)
                else:
                    _save_adapter(model, opt, dest, upd.published, value_head=value_head)
                state.version = new
                state.optimizer_steps += int(upd.stats.get("optimizer_steps", 0))
                state.trained_groups = sorted(set(state.trained_groups) | this_iter | {r["group_id"] for r in rows})
                state.save(state_path)
                served_versions.publish(new)
                t_pub = time.monotonic() - t2

                stale = [r["staleness"] for r in rows]
                row = {
                    "version": v, "published": new, **summary, **{k: v_ for k, v_ in upd.stats.items()},
                    "batch_rows": len(rows), "batch_dropped": dict(skipped) | exported.get("dropped", {}),
                    "superseded_episodes": superseded,
                    "staleness_mean": sum(stale) / len(stale) if stale else 0.0, "staleness_max": max(stale, default=0),
                    "behaviour_policy": rolled.policy, "overlapped_next_rollout": ahead is not None,
                    "rollout_s": round(t_roll, 2), "train_s": round(t_train, 2), "publish_s": round(t_pub, 2),
                    "rollout_tokens_per_s": round(usage.get("completion_tokens", 0) / t_roll, 2) if t_roll else 0.0,
                    "train_tokens_per_s": round(upd.stats.get("tokens", 0) / t_train, 2) if t_train else 0.0,
                    "update_steps": upd.steps,  # each optimizer step's statistics (PPO epochs x mini-batches)
                    **critic,  # --credit gae: the value pass's seconds, the critic's loss and explained variance
                    # progress or gae credit: the batch's trajectories whose step rewards fell back to the outcome
                    **({"progress_fallback": len(set(exported["progress_fallback"])
                                                 & {r["trajectory_id"] for r in rows})}
                       if "progress_fallback" in exported else {}),
                }
                with open(out / "metrics.jsonl", "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")
                ran.append(row)
                metrics_report.log_iteration(row, upd.steps)
                all_rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
                _chart(all_rows, out / "metrics.png")
                emit("published", row)
        return ran
    finally:
        _send(None)  # the other processes stop (after a failure here torchrun stops them anyway)
