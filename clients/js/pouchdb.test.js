// PouchDB (HTTP adapter and in-memory databases) against a Settee server at SETTEE_URL,
// authenticating with SETTEE_USER / SETTEE_PASSWORD. Run by the Rust test `clients`.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-http'))
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-replication'));

const url = process.env.SETTEE_URL;
const auth = { username: process.env.SETTEE_USER, password: process.env.SETTEE_PASSWORD };
const remote = (name) => new PouchDB(`${url}/${name}`, { auth });

test('documents: put, get, bulkDocs, allDocs, conflicts', async () => {
  const db = remote('pouch-docs');
  const info = await db.info();
  assert.equal(info.db_name, 'pouch-docs');
  const put = await db.put({ _id: 'a', n: 1 });
  assert.ok(put.ok);
  const a = await db.get('a');
  assert.equal(a.n, 1);
  await assert.rejects(db.put({ _id: 'a', n: 2 }), (e) => e.status === 409);
  await db.put({ ...a, n: 2 });
  const bulk = await db.bulkDocs([{ _id: 'b' }, { _id: 'c', x: [1, 2] }, { _id: 'a' }]);
  assert.equal(bulk.length, 3);
  assert.ok(bulk[0].ok && bulk[1].ok);
  assert.equal(bulk[2].status, 409);
  const all = await db.allDocs({ include_docs: true });
  assert.deepEqual(all.rows.map((r) => r.id), ['a', 'b', 'c']);
  assert.deepEqual(all.rows[2].doc.x, [1, 2]);
  const keyed = await db.allDocs({ keys: ['c', 'zz'] });
  assert.equal(keyed.rows[1].error, 'not_found');
  const b = await db.get('b');
  await db.remove(b);
  await assert.rejects(db.get('b'), (e) => e.status === 404);
  const history = await db.get('a', { revs: true, revs_info: true });
  assert.equal(history._revisions.start, 2);
});

test('changes: normal and live feeds', async () => {
  const db = remote('pouch-changes');
  await db.bulkDocs([{ _id: 'one' }, { _id: 'two' }]);
  const normal = await db.changes({ include_docs: true });
  assert.equal(normal.results.length, 2);
  const seen = new Promise((resolve, reject) => {
    const feed = db.changes({ live: true, since: 'now' })
      .on('change', (c) => { if (c.id === 'three') { feed.cancel(); resolve(c); } })
      .on('error', reject);
  });
  await new Promise((r) => setTimeout(r, 200));
  await db.put({ _id: 'three' });
  const change = await seen;
  assert.ok(change.changes[0].rev.startsWith('1-'));
});

test('replication both ways with conflicts, in-memory <-> server', async () => {
  const server = remote('pouch-repl');
  const local = new PouchDB('local-repl', { adapter: 'memory' });
  await local.bulkDocs(Array.from({ length: 30 }, (_, i) => ({ _id: `doc${i}`, i })));
  const up = await local.replicate.to(server);
  assert.equal(up.docs_written, 30);
  assert.equal((await server.info()).doc_count, 30);
  // Edit the same document on both sides, then sync both ways.
  const base = await local.get('doc0');
  await local.put({ ...base, side: 'local' });
  await server.put({ ...(await server.get('doc0')), side: 'server', more: true });
  await server.put({ _id: 'server-only' });
  await local.replicate.to(server);
  await local.replicate.from(server);
  const l = await local.get('doc0', { conflicts: true });
  const s = await server.get('doc0', { conflicts: true });
  assert.equal(l._rev, s._rev, 'both sides pick the same winner');
  assert.equal(l._conflicts.length, 1);
  assert.deepEqual(l._conflicts, s._conflicts);
  assert.equal((await local.get('server-only'))._id, 'server-only');
  // Resolve the conflict on the server; the resolution replicates back.
  await server.remove('doc0', s._conflicts[0]);
  await local.replicate.from(server);
  const resolved = await local.get('doc0', { conflicts: true });
  assert.equal(resolved._conflicts, undefined);
  // A second replication finds nothing to do (checkpoints in _local documents).
  const again = await local.replicate.to(server);
  assert.equal(again.docs_written, 0);
  await local.destroy();
});

test('attachments: put, get, and replication both ways', async () => {
  const server = remote('pouch-atts');
  const put = await server.putAttachment('photo', 'pic.bin', Buffer.from([1, 2, 3, 4]), 'image/png');
  assert.ok(put.ok);
  const got = await server.getAttachment('photo', 'pic.bin');
  assert.deepEqual([...got], [1, 2, 3, 4]);
  const doc = await server.get('photo');
  assert.equal(doc._attachments['pic.bin'].content_type, 'image/png');
  assert.equal(doc._attachments['pic.bin'].stub, true);
  const local = new PouchDB('local-atts', { adapter: 'memory' });
  await local.replicate.from(server);
  const copy = await local.getAttachment('photo', 'pic.bin');
  assert.deepEqual([...copy], [1, 2, 3, 4]);
  await local.put({ _id: 'note', _attachments: { 'n.txt': { content_type: 'text/plain', data: Buffer.from('from pouch').toString('base64') } } });
  await local.replicate.to(server);
  const text = await server.getAttachment('note', 'n.txt');
  assert.equal(text.toString(), 'from pouch');
  const withData = await server.get('note', { attachments: true });
  assert.equal(Buffer.from(withData._attachments['n.txt'].data, 'base64').toString(), 'from pouch');
  await local.destroy();
});
