"""The per-episode OpenClaw configuration (`openclaw.json`) and how OpenClaw is launched inside the sandbox.

Inside every sandbox (the paths below are bind mounts set up by the rollout, see `clawgym.agent.openclaw.kind`):

    /clawgym/openclaw   the installation (node + the npm package), read-only
    /clawgym/gateway    the directory holding the gateway's unix socket, read-only
    /clawgym/state      this episode's own writable directory: config, prompts, OpenClaw's state, results

The sandbox has no network of its own (bwrap `--unshare-all`, Docker `network_mode=none`): only its loopback.
A relay (a few lines of Node, started next to OpenClaw) listens on 127.0.0.1:RELAY_PORT of the sandbox's
loopback and forwards each connection to the gateway's unix socket; OpenClaw's provider points at
`http://127.0.0.1:RELAY_PORT/t/<trajectory>/g/<task>/v1`, so every call it makes is recorded under the episode,
and its provider key is that route's key: the socket is the same in every sandbox, but the gateway takes a call
on a trajectory's route only with that trajectory's key, so a sandbox can reach no other trajectory.
"""

from __future__ import annotations

import shlex
from typing import Any

INSTALL_MOUNT = "/clawgym/openclaw"
GATEWAY_MOUNT = "/clawgym/gateway"
STATE_MOUNT = "/clawgym/state"
SOCKET_NAME = "gw.sock"
RELAY_PORT = 18080
PROVIDER = "clawgym"
# OpenClaw's tools kept: the file and shell tools (no web, memory, sessions, images: the sandbox has no network)
TOOLS_ALLOW = ["read", "write", "edit", "apply_patch", "ls", "exec", "process"]

# TCP on the sandbox's loopback -> the gateway's unix socket. Writes a ready file once listening.
RELAY_JS = r"""
const net = require('net'), fs = require('fs');
const [sock, port, ready] = [process.argv[1], Number(process.argv[2]), process.argv[3]];
const srv = net.createServer((c) => {
  const u = net.connect(sock);
  const end = () => { c.destroy(); u.destroy(); };
  c.pipe(u); u.pipe(c);
  c.on('error', end); u.on('error', end); c.on('close', end); u.on('close', end);
});
srv.on('error', (e) => { process.stderr.write('relay: ' + e.message + '\n'); process.exit(3); });
srv.listen(port, '127.0.0.1', () => fs.writeFileSync(ready, 'ready\n'));
"""

# One OpenClaw session: relay up, `openclaw agent exec`, relay down; exit code of OpenClaw (or 97: no relay).
LAUNCH_SH = r"""
set -u
n="$1"; shift
S=/clawgym/state
B=/clawgym/openclaw/node/bin
rm -f "$S/relay.ready"
"$B/node" -e "$RELAY_JS" "$GATEWAY_SOCKET" "$RELAY_PORT" "$S/relay.ready" 2>"$S/relay-$n.err" &
relay=$!
i=0
while [ ! -f "$S/relay.ready" ]; do
  i=$((i + 1))
  if [ "$i" -gt 400 ] || ! kill -0 "$relay" 2>/dev/null; then echo "relay did not start" >&2; exit 97; fi
  sleep 0.025
done
"$B/node" /clawgym/openclaw/lib/node_modules/openclaw/openclaw.mjs agent exec --message-file "$S/prompt-$n.md" \
  "$@" >"$S/result-$n.json" 2>"$S/stderr-$n.log"
rc=$?
kill "$relay" 2>/dev/null
wait "$relay" 2>/dev/null
exit $rc
"""


def openclaw_config(*, base_url: str, model: str, workspace: str, max_tokens: int = 1024,
                    context_window: int = 32768, api_key: str = "clawgym") -> dict[str, Any]:
    """The `openclaw.json` of one episode: one OpenAI-compatible provider (the gateway, through the relay),
    bootstrap files skipped (the task's workspace is left as the task made it), the small tool surface.
    `api_key`: what OpenClaw sends as its bearer token: the key of its own trajectory route (see
    clawgym.gateway.routes), the only credential its sandbox ever holds."""
    return {
        "models": {"providers": {PROVIDER: {
            "baseUrl": base_url, "apiKey": api_key, "api": "openai-completions",
            "models": [{"id": model, "name": model, "reasoning": False, "input": ["text"],
                        "contextWindow": context_window, "maxTokens": max_tokens,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
        }}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{model}"}, "skipBootstrap": True,
                                "workspace": workspace}},
        "tools": {"toolSearch": False, "allow": list(TOOLS_ALLOW)},
    }


def relay_url(route_path: str) -> str:
    """The base URL OpenClaw uses inside the sandbox for a gateway route path (`/t/<traj>/g/<group>/v1`)."""
    return f"http://127.0.0.1:{RELAY_PORT}{route_path}"


def launch_argv(session: int, *, workspace: str, timeout_s: int, thinking: str = "off") -> list[str]:
    return ["sh", "-c", LAUNCH_SH, "launch", str(session), "--cwd", workspace, "--state-dir", f"{STATE_MOUNT}/oc",
            "--config", f"{STATE_MOUNT}/openclaw.json", "--json", "--timeout", str(max(1, timeout_s)),
            "--thinking", thinking]


def launch_env(workspace: str) -> dict[str, str]:
    return {
        "HOME": "/root", "OPENCLAW_STATE_DIR": f"{STATE_MOUNT}/oc", "OPENCLAW_CONFIG_PATH": f"{STATE_MOUNT}/openclaw.json",
        "PATH": f"{INSTALL_MOUNT}/node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "NO_COLOR": "1", "FORCE_COLOR": "0", "TMPDIR": "/tmp", "RELAY_JS": RELAY_JS,
        "GATEWAY_SOCKET": f"{GATEWAY_MOUNT}/{SOCKET_NAME}", "RELAY_PORT": str(RELAY_PORT), "WORKSPACE": workspace,
    }


def describe(argv: list[str]) -> str:
    """The command line, for logs (without the launch script itself)."""
    return " ".join(shlex.quote(a) for a in argv[4:])
