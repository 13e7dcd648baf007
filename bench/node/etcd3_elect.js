// SPDX-License-Identifier: MIT
// etcd3_elect.js — the second anchor of the graceful failover benchmark: the
// Election of the `etcd3` Node client (npm), an independent implementation of
// the election protocol (its own campaign, wait and resign code, on grpc-js).
//
//   node etcd3_elect.js ENDPOINT NAME VALUE [TTL_S]
//
// Campaigns for NAME (etcd3 puts its keys under "election/NAME/") with a lease
// of TTL_S seconds (default 60, as `etcdctl elect`), and writes one line to
// stdout once elected ("elected NAME VALUE"): the line `bench/proc_bench.c`
// times, as it times etcdctl elect's first line. SIGINT or SIGTERM resigns
// (etcd3's resign revokes the campaign's lease, which deletes the key) and exits
// 0. Started by proc_bench with node_modules installed by scripts/bench.sh
// (`npm ci` in bench/node).
'use strict';
const { Etcd3 } = require('etcd3');

const [endpoint, name, value, ttlArg] = process.argv.slice(2);
if (!endpoint || !name || value === undefined) {
  process.stderr.write('usage: node etcd3_elect.js ENDPOINT NAME VALUE [TTL_S]\n');
  process.exit(2);
}
const ttl = ttlArg ? Number(ttlArg) : 60;
const hosts = endpoint
  .split(',')
  .map(e => (e.includes('://') ? e : `http://${e}`));

const client = new Etcd3({ hosts });
const campaign = client.election(name, ttl).campaign(value);
let stopping = false;

campaign.on('elected', () => {
  // A pipe is written synchronously by Node on Linux: the line is out when
  // this returns.
  process.stdout.write(`elected ${name} ${value}\n`);
});
campaign.on('error', err => {
  if (stopping) return;
  process.stderr.write(`etcd3_elect: ${err && err.message ? err.message : err}\n`);
  process.exit(1);
});

async function stop() {
  if (stopping) return;
  stopping = true;
  let rc = 0;
  try {
    await campaign.resign();
  } catch (err) {
    process.stderr.write(`etcd3_elect: resign: ${err && err.message ? err.message : err}\n`);
    rc = 1;
  }
  client.close();
  process.exit(rc);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
