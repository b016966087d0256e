// PouchDB syncing with a database that Settee's own replicator keeps in step with a second
// Settee: SETTEE_URL runs two continuous `_replicator` jobs (its `relay` database to and from
// SETTEE_URL2's), and an in-memory PouchDB syncs live with SETTEE_URL. A document written in
// PouchDB must reach the second server, and one written on the second server must reach
// PouchDB. Both servers share the admin SETTEE_USER / SETTEE_PASSWORD.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-http'))
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-replication'));

const user = process.env.SETTEE_USER;
const password = process.env.SETTEE_PASSWORD;
const auth = { username: user, password };
const header = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const first = process.env.SETTEE_URL.replace(/\/+$/, '');
const second = process.env.SETTEE_URL2.replace(/\/+$/, '');
const withCreds = (u) => u.replace('http://', `http://${encodeURIComponent(user)}:${encodeURIComponent(password)}@`);

async function call(method, u, body) {
  const res = await fetch(u, {
    method,
    headers: { Authorization: header, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function until(what, check, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a document written in PouchDB reaches the second server through Settee\'s replicator', async () => {
  const db = `relay-${crypto.randomBytes(4).toString('hex')}`;
  for (const server of [first, second]) {
    assert.equal((await call('PUT', `${server}/${db}`)).status, 201);
  }
  for (const [id, source, target] of [
    [`${db}-out`, db, `${withCreds(second)}/${db}`],
    [`${db}-in`, `${withCreds(second)}/${db}`, db],
  ]) {
    const r = await call('PUT', `${first}/_replicator/${id}`, { source, target, continuous: true });
    assert.equal(r.status, 201, JSON.stringify(r.json));
  }
  const local = new PouchDB(`local-${db}`, { adapter: 'memory' });
  const remote = new PouchDB(`${first}/${db}`, { auth });
  const sync = local.sync(remote, { live: true, retry: true });
  try {
    await local.put({ _id: 'from-pouchdb', hello: 'world' });
    await until('the PouchDB document on the second server', async () => {
      const r = await call('GET', `${second}/${db}/from-pouchdb`);
      return r.status === 200 && r.json.hello === 'world';
    });
    assert.equal((await call('PUT', `${second}/${db}/from-second`, { v: 2 })).status, 201);
    await until('the second server\'s document in PouchDB', async () => {
      try {
        return (await local.get('from-second')).v === 2;
      } catch (e) {
        if (e.status === 404) return false;
        throw e;
      }
    });
    // The same revision everywhere: nothing was rewritten on the way.
    const revs = await Promise.all([
      local.get('from-pouchdb'),
      call('GET', `${first}/${db}/from-pouchdb`).then((r) => r.json),
      call('GET', `${second}/${db}/from-pouchdb`).then((r) => r.json),
    ]);
    assert.equal(new Set(revs.map((d) => d._rev)).size, 1, JSON.stringify(revs));
  } finally {
    sync.cancel();
    for (const id of [`${db}-out`, `${db}-in`]) {
      const doc = await call('GET', `${first}/_replicator/${id}`);
      await call('DELETE', `${first}/_replicator/${id}?rev=${doc.json._rev}`);
    }
    await local.destroy();
  }
});
