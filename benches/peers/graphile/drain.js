// graphile-worker's side of the drain benchmark (benches/benches/workers.rs, `drain`): the same
// number of trivial jobs drained by the same number of worker processes at the same concurrency as
// slotguard's workers, on the same PostgreSQL server, in the same run.
//
//   node drain.js fill N      migrates PEERS_GW_SCHEMA and queues N `noop` jobs (addJobs, batches of 1,000)
//   node drain.js work C      one worker process with concurrency C; prints `ready`, stops when stdin closes
//
// Environment: PEERS_DATABASE_URL, PEERS_GW_SCHEMA. graphile-worker runs with its defaults otherwise
// (LISTEN/NOTIFY plus its 2 s poll; no batching of job completions is configured).
"use strict";

const { run, makeWorkerUtils, Logger } = require("graphile-worker");

function env(name) {
  const value = process.env[name];
  if (value === undefined || value === "") {
    console.error(`graphile drain: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const connectionString = env("PEERS_DATABASE_URL");
const schema = env("PEERS_GW_SCHEMA");
const logger = new Logger(() => (level, message) => {
  if (level === "error") {
    console.error(`graphile drain ${level}: ${message}`);
  }
});

async function fill(n) {
  const utils = await makeWorkerUtils({ connectionString, schema, logger });
  try {
    await utils.migrate();
    for (let done = 0; done < n; done += 1000) {
      const specs = [];
      for (let i = done; i < Math.min(n, done + 1000); i++) {
        specs.push({ identifier: "noop", payload: { i } });
      }
      await utils.addJobs(specs);
    }
  } finally {
    await utils.release();
  }
}

async function work(concurrency) {
  const runner = await run({
    connectionString,
    schema,
    concurrency,
    noHandleSignals: true,
    logger,
    taskList: {
      async noop() {},
    },
  });
  console.log("ready");
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await runner.stop();
    process.exit(0);
  });
}

const [mode, arg] = process.argv.slice(2);
const main = mode === "fill" ? fill(Number(arg)) : work(Number(arg));
main.catch((e) => {
  console.error(`graphile drain: ${e}`);
  process.exit(1);
});
