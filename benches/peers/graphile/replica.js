// One graphile-worker replica for the peers benchmark, spawned by the Rust harness (src/systems.rs).
//
// Runs graphile-worker with its defaults and one crontab line, `<PEERS_CRONTAB> peers_tick ?id=...`,
// against the schema PEERS_GW_SCHEMA. Each execution of `peers_tick` takes `started_at` first, then
// inserts (system, replica, slot, started_at) into the harness' ledger, where the slot is the
// crontab's scheduled time (`payload._cron.ts`).
//
// Prints `ready` on stdout once `run()` has resolved. Stops gracefully (runner.stop()) when stdin
// closes or on SIGTERM/SIGINT; the harness SIGKILLs it for the restart variant.
"use strict";

const { performance } = require("node:perf_hooks");
const { run, Logger } = require("graphile-worker");

function env(name) {
  const value = process.env[name];
  if (value === undefined || value === "") {
    console.error(`graphile replica: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const connectionString = env("PEERS_DATABASE_URL");
const schema = env("PEERS_GW_SCHEMA");
const ledger = env("PEERS_LEDGER"); // schema-qualified table name, made by the harness
const system = env("PEERS_SYSTEM");
const replica = Number(env("PEERS_REPLICA"));
const pattern = env("PEERS_CRONTAB"); // 5 fields, e.g. `* * * * *`
const opts = process.env.PEERS_CRONTAB_OPTS || ""; // extra crontab options, e.g. `&fill=2m`

if (!/^[a-z0-9_]+\.[a-z0-9_]+$/.test(ledger)) {
  console.error(`graphile replica: unexpected ledger table name ${ledger}`);
  process.exit(2);
}

// Wall-clock time with sub-millisecond resolution. Node's monotonic clock is slewed by NTP like the
// wall clock, so the sum only drifts from it on a clock step.
function nowMs() {
  return performance.timeOrigin + performance.now();
}

const taskList = {
  async peers_tick(payload, helpers) {
    const started = nowMs();
    await helpers.query(
      `INSERT INTO ${ledger} (system, replica, slot_second, started_at)
       VALUES ($1, $2, $3::timestamptz, to_timestamp($4::float8 / 1000))`,
      [system, replica, payload._cron.ts, started],
    );
  },
};

// Warnings and errors only, one line each, tagged with the replica.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") {
    console.error(`graphile r${replica} ${level}: ${message}`);
  }
});

async function main() {
  const runner = await run({
    connectionString,
    schema,
    taskList,
    crontab: `${pattern} peers_tick ?id=peers_every_minute${opts}\n`,
    logger,
    noHandleSignals: true,
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await runner.stop();
    } catch (e) {
      console.error(`graphile r${replica}: stop: ${e}`);
    }
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.stdin.on("end", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
  console.log("ready");
  await runner.promise;
}

main().catch((e) => {
  console.error(`graphile r${replica}: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
