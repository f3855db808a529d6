#!/usr/bin/env bash
# The real-agent suite (npm run test:agents, issue 11): published ACP agents (pinned devDependencies) against the fake
# model server of test/agents/support, on 127.0.0.1 only. When the kernel lets us (`unshare -n`, and `ip` to bring the
# loopback up), the suite runs in a network namespace of its own that has nothing but loopback, so no agent can reach
# a real model or any other host; otherwise it runs in the normal network and says why.
# Arguments are passed to vitest (e.g. a test file).
set -euo pipefail
cd "$(dirname "$0")/.."
run=(npx vitest run --config vitest.agents.config.ts "$@")
if [ "${AGENTS_SUITE_NETNS:-1}" != "0" ] && command -v unshare >/dev/null && command -v ip >/dev/null \
  && unshare -n true 2>/dev/null; then
  echo "[agents suite] running in a loopback-only network namespace (unshare -n)" >&2
  exec unshare -n bash -c 'ip link set lo up && exec "$@"' bash "${run[@]}"
fi
if [ "${AGENTS_SUITE_NETNS:-1}" = "0" ]; then
  reason="AGENTS_SUITE_NETNS=0"
elif ! command -v unshare >/dev/null; then
  reason="unshare is not installed"
elif ! command -v ip >/dev/null; then
  reason="ip (iproute2) is not installed"
else
  reason="unshare -n is not permitted here ($(unshare -n true 2>&1 | head -1))"
fi
echo "[agents suite] NOT isolated from the network: ${reason}; the agents still only get the fake model's 127.0.0.1 URL" >&2
exec "${run[@]}"
