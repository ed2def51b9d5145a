#!/usr/bin/env bash
# Install the peer for bench/chat/run.py (bench/chat/peer_loop.py): the official `openai`
# Python SDK and the official MCP Python SDK (`mcp`), newest from PyPI, into one venv, and print
# the venv's python on stdout.
#
#   bash bench/chat/install.sh
#   # -> /root/.cache/quarry-bench/chat/peer-venv/bin/python
#
# Idempotent: a second run only checks that both import (`openai`, `mcp.client.stdio`).
# Knobs (env): QUARRY_BENCH_CACHE (default ~/.cache/quarry-bench), CHAT_BENCH_PYTHON (an
# interpreter >= 3.10; default: python3.12, else python3), OPENAI_VERSION / MCP_VERSION (default:
# newest that resolves), CHAT_BENCH_FORCE=1 (reinstall).
# On failure it says why on stderr and exits 1; run.py then records the peer as skipped.
set -uo pipefail

CACHE="${QUARRY_BENCH_CACHE:-$HOME/.cache/quarry-bench}/chat"
VENV="$CACHE/peer-venv"
OPENAI_VERSION="${OPENAI_VERSION:-}"
MCP_VERSION="${MCP_VERSION:-}"
log() { printf '[chat-install] %s\n' "$*" >&2; }

PY="${CHAT_BENCH_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for c in python3.12 python3.13 python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      PY="$("$c" -c 'import sys; print(sys.executable)')"; break
    fi
  done
fi
if [[ -z "$PY" ]]; then log "no python >= 3.10 found"; exit 1; fi
mkdir -p "$CACHE"

spec="openai${OPENAI_VERSION:+==$OPENAI_VERSION} mcp${MCP_VERSION:+==$MCP_VERSION}"
stamp="$VENV/.installed-$(echo "$spec" | tr ' =' '_-')"
check() {
  "$VENV/bin/python" -c 'import openai, mcp, mcp.client.stdio
from openai import AsyncOpenAI
from mcp import ClientSession, StdioServerParameters
from importlib.metadata import version
print("openai", version("openai"), "/ mcp", version("mcp"))'
}

if [[ "${CHAT_BENCH_FORCE:-0}" != 1 && -f "$stamp" ]] && check >/dev/null 2>&1; then
  log "already installed: $(check 2>/dev/null)"
  echo "$VENV/bin/python"
  exit 0
fi
log "installing $spec into $VENV with $PY"
rm -rf "$VENV"
if ! "$PY" -m venv "$VENV" >&2; then log "venv failed"; exit 1; fi
# shellcheck disable=SC2086
if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check $spec >&2; then
  log "pip install $spec failed"
  exit 1
fi
if ! check >&2; then log "installed but does not import"; exit 1; fi
touch "$stamp"
echo "$VENV/bin/python"
