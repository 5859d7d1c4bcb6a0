#!/usr/bin/env bash
# No Docker engine runs here, so this checks the Dockerfile's contract another way:
# in a clean copy of the repository it runs the Dockerfile's build commands, then its
# start command with its environment, and checks that the server answers /healthz and
# a query, and drains on SIGTERM with exit code 0.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$repo"
git ls-files -z | tar --null -cf - -T - | tar -xf - -C "$work"
cd "$work"

# The build stage: the Dockerfile's RUN line.
grep -q '^RUN npm install --no-audit --no-fund && npm prune --omit=dev' Dockerfile
npm install --no-audit --no-fund >/dev/null
npm prune --omit=dev >/dev/null

# The run stage: the Dockerfile's CMD with its ENV (listening on loopback here: the
# image's 0.0.0.0 requires configured users).
# The command is read from the Dockerfile, so a flag added there is the flag checked here.
mapfile -t cmd < <(node -e "const m=/^CMD (\[.*\])$/m.exec(require('fs').readFileSync('Dockerfile','utf8'));if(!m)process.exit(1);for(const a of JSON.parse(m[1]))console.log(a)")
test "${cmd[0]}" = "node"
test "${cmd[-1]}" = "serve"
port=$(node -e "const s=require('net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})")
mport=$(node -e "const s=require('net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})")
mkdir -p data
# Users come from the environment, as a container gets them.
verifier=$(printf 'pw\n' | node dist/launch.cjs passwd agent | sed -n 's/^    password: //p')
users="[{\"name\": \"agent\", \"password\": \"$verifier\", \"role\": \"writer\"}]"
NODE_ENV=production COTWIRE_HOST=127.0.0.1 COTWIRE_PORT="$port" COTWIRE_DB="$work/data/cotwire.duckdb" COTWIRE_HTTP_PORT="$mport" \
  COTWIRE_USERS="$users" "${cmd[@]}" > server.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if node -e "fetch('http://127.0.0.1:$mport/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; then break; fi
  sleep 0.1
done
node -e "fetch('http://127.0.0.1:$mport/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
answer=$(PGPASSWORD=pw psql -X -At -h 127.0.0.1 -p "$port" -U agent cotwire -c "SELECT 40 + 2")
test "$answer" = "42"
# A writer appends to the ledger; the chain verifies.
PGPASSWORD=pw psql -X -q -h 127.0.0.1 -p "$port" -U agent cotwire -c "INSERT INTO _cot_steps (session_id, step_type) VALUES ('container', 'Observation')"
test "$(PGPASSWORD=pw psql -X -At -h 127.0.0.1 -p "$port" -U agent cotwire -c "SELECT valid FROM cot_verify('container')")" = "t"
kill -TERM "$pid"
wait "$pid"
grep -q 'shut down cleanly' server.log
echo "docker contract: build, start, /healthz, query and SIGTERM drain all work"
