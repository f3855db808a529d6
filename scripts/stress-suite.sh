#!/usr/bin/env bash
# Runs the whole test suite twice in a row beside two CPU-burning processes and reports the time of each run
# (issue 10: the suite must pass on a loaded 2-core machine). Exits non-zero when either run fails.
#
#   scripts/stress-suite.sh            # from the repository root; builds once, then runs `vitest run` twice
#
# The runs happen inside a private PostgreSQL cluster (scripts/pg-test-cluster.sh run), so the PostgreSQL suites run
# too instead of skipping: when ACP_ORCHESTRATOR_TEST_PG is not set, the script starts again inside the cluster (one
# cluster for both runs, removed at the end). When PostgreSQL cannot be started the script fails (it does not quietly
# run without it); set ACP_ORCHESTRATOR_TEST_PG yourself to use another database.
#
# The burners are plain `node -e` busy loops started by this script; they are stopped (by their pids) when it ends,
# whatever happens. Do not run this on a shared machine while others build or test: it takes the CPU on purpose.
set -u
cd "$(dirname "$0")/.."

if [ -z "${ACP_ORCHESTRATOR_TEST_PG:-}" ]; then
  echo "stress-suite: starting a private PostgreSQL cluster for the runs (scripts/pg-test-cluster.sh)"
  exec bash scripts/pg-test-cluster.sh run -- bash scripts/stress-suite.sh "$@"
fi
echo "stress-suite: PostgreSQL suites use ACP_ORCHESTRATOR_TEST_PG"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT INT TERM

npm run build >/dev/null || { echo "stress-suite: build failed" >&2; exit 2; }

for _ in 1 2; do
  node -e 'for (;;) {}' &
  burners+=("$!")
done
echo "stress-suite: two CPU burners running (pids ${burners[*]})"

status=0
for run in 1 2; do
  start=$(date +%s)
  if npx vitest run; then result=passed; else result=FAILED; status=1; fi
  end=$(date +%s)
  echo "stress-suite: run ${run} ${result} in $((end - start)) s"
done

stop_burners
burners=()
if [ "$status" -eq 0 ]; then echo "stress-suite: both runs passed"; else echo "stress-suite: a run failed" >&2; fi
exit "$status"
