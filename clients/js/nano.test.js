// nano (the official Apache CouchDB Node.js client) against a Settee server at SETTEE_URL, used
// the way nano's README shows. Admin credentials come from SETTEE_USER / SETTEE_PASSWORD; the
// URL itself carries none. Every test works in databases with a fresh random name, so the suite
// can be rerun against the same server (and against a real CouchDB for comparison).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const Nano = require('nano');

const url = process.env.SETTEE_URL;
const user = process.env.SETTEE_USER;
const password = process.env.SETTEE_PASSWORD;
assert.ok(url && user && password, 'SETTEE_URL, SETTEE_USER and SETTEE_PASSWORD must be set');

// http://user:pass@host:port, as in nano's README.
function urlWith(name, pass) {
  const u = new URL(url);
  return `${u.protocol}//${encodeURIComponent(name)}:${encodeURIComponent(pass)}@${u.host}`;
}
const plainUrl = url.replace(/\/+$/, '');
const couch = Nano(urlWith(user, password));

const suffix = () => crypto.randomBytes(5).toString('hex');

// A fresh database, dropped when the test ends.
async function freshDb(t, prefix) {
  const name = `${prefix}-${suffix()}`;
  const created = await couch.db.create(name);
  assert.equal(created.ok, true);
  t.after(() => couch.db.destroy(name).catch(() => {}));
  return { name, db: couch.use(name) };
}

// Asserts that `promise` rejects with the given HTTP status (and CouchDB error name, if given).
async function rejectsWith(promise, statusCode, error) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.statusCode, statusCode, `expected HTTP ${statusCode}, got ${e.statusCode}: ${e.message}`);
    if (error) assert.equal(e.error, error);
    return true;
  });
}

let vendorName;
async function isSettee() {
  if (vendorName === undefined) vendorName = ((await couch.info()).vendor || {}).name;
  return vendorName === 'Settee';
}

test('server: info, uuids, database create/get/list/destroy', async () => {
  const info = await couch.info();
  assert.equal(info.couchdb, 'Welcome');
  assert.match(info.version, /^3\./);
  const { uuids } = await couch.uuids(3);
  assert.equal(uuids.length, 3);
  assert.equal(new Set(uuids).size, 3);

  const name = `nano-dbs-${suffix()}`;
  assert.deepEqual(await couch.db.create(name), { ok: true });
  await rejectsWith(couch.db.create(name), 412, 'file_exists');
  const dbInfo = await couch.db.get(name);
  assert.equal(dbInfo.db_name, name);
  assert.equal(dbInfo.doc_count, 0);
  assert.ok((await couch.db.list()).includes(name));
  assert.equal((await couch.use(name).info()).db_name, name);
  assert.deepEqual(await couch.db.destroy(name), { ok: true });
  await rejectsWith(couch.db.get(name), 404, 'not_found');
  await rejectsWith(couch.db.destroy(name), 404, 'not_found');
  assert.ok(!(await couch.db.list()).includes(name));
  await rejectsWith(couch.db.create('Bad Name!'), 400, 'illegal_database_name');
});

// (A wrong password for the real admin is not tried: CouchDB 3.4+ locks an account out after a
// few failures, which would break every later test.)
test('credentials: unknown user in the URL is refused, no credentials cannot create databases', async () => {
  await rejectsWith(Nano(urlWith(`nobody-${suffix()}`, 'wrong')).db.list(), 401, 'unauthorized');
  await rejectsWith(Nano(plainUrl).db.create(`nano-anon-${suffix()}`), 401, 'unauthorized');
});

// A non-admin user in _users, member of a fresh database; removed at the end of the test.
async function memberUser(t) {
  const name = `nanouser-${suffix()}`;
  const pass = `pw-${suffix()}`;
  const users = couch.use('_users');
  const made = await users.insert({ _id: `org.couchdb.user:${name}`, name, password: pass, roles: ['nano-role'], type: 'user' });
  t.after(() => users.destroy(made.id, made.rev).catch(() => {}));
  const { name: dbName, db } = await freshDb(t, 'nano-auth');
  await couch.request({ db: dbName, path: '_security', method: 'PUT', body: { admins: { names: [], roles: [] }, members: { names: [name], roles: [] } } });
  return { name, pass, dbName, db };
}

test('auth: nano.auth() answers with the user and its roles; a wrong password is 401', async (t) => {
  const { name, pass } = await memberUser(t);
  const client = Nano(plainUrl);
  const answer = await client.auth(name, pass);
  assert.equal(answer.ok, true);
  assert.equal(answer.name, name);
  assert.deepEqual(answer.roles, ['nano-role']);
  await rejectsWith(Nano(plainUrl).auth(name, `${pass}-wrong`), 401, 'unauthorized');
});

test('auth: after nano.auth() the cookie session authenticates later requests as that user', async (t) => {
  const { name, pass, dbName } = await memberUser(t);
  // Without a session, the member-only database is closed to this client.
  const anonymous = Nano(plainUrl);
  await rejectsWith(anonymous.use(dbName).insert({ _id: 'x' }), 401, 'unauthorized');
  const anonSession = await anonymous.session();
  assert.equal(anonSession.userCtx.name, null);

  const client = Nano(plainUrl);
  await client.auth(name, pass);
  // nano keeps the AuthSession cookie in its own jar and sends it on every later request.
  const session = await client.session();
  assert.equal(session.ok, true);
  assert.equal(session.userCtx.name, name, 'the session must belong to the user, not be anonymous');
  assert.deepEqual(session.userCtx.roles, ['nano-role']);
  assert.equal(session.info.authenticated, 'cookie');
  const db = client.use(dbName);
  const put = await db.insert({ _id: 'by-member', who: name });
  assert.equal(put.ok, true);
  assert.equal((await db.get('by-member')).who, name);
  // Members cannot do admin things, even with a valid session.
  await rejectsWith(client.db.create(`nano-member-${suffix()}`), 401, 'unauthorized');
});

test('auth: nano.auth() as the server admin gives an _admin session', async () => {
  const client = Nano(plainUrl);
  const answer = await client.auth(user, password);
  assert.equal(answer.name, user);
  assert.ok(answer.roles.includes('_admin'));
  const session = await client.session();
  assert.equal(session.userCtx.name, user);
  assert.ok(session.userCtx.roles.includes('_admin'));
});

test('documents: insert, get, head, update, destroy, 409 conflicts', async (t) => {
  const { db } = await freshDb(t, 'nano-docs');
  // POST without an id: the server chooses one.
  const auto = await db.insert({ kind: 'auto' });
  assert.equal(auto.ok, true);
  assert.match(auto.id, /^[0-9a-f]{32}$/);
  assert.match(auto.rev, /^1-[0-9a-f]{32}$/);
  // PUT with a name.
  const first = await db.insert({ n: 1, nested: { list: [1, 'two', null, true], s: 'h\u00e9llo \u2603' } }, 'doc1');
  assert.equal(first.id, 'doc1');
  const doc = await db.get('doc1');
  assert.equal(doc._rev, first.rev);
  assert.deepEqual(doc.nested, { list: [1, 'two', null, true], s: 'h\u00e9llo \u2603' });
  const head = await db.head('doc1');
  assert.equal(head.etag, `"${first.rev}"`);
  // Writing without the current revision is a conflict.
  await rejectsWith(db.insert({ n: 2 }, 'doc1'), 409, 'conflict');
  const second = await db.insert({ ...doc, n: 2 });
  assert.match(second.rev, /^2-/);
  // The old revision is now stale: updating or deleting with it is a conflict.
  await rejectsWith(db.insert({ ...doc, n: 3 }), 409, 'conflict');
  await rejectsWith(db.destroy('doc1', first.rev), 409, 'conflict');
  // Old revisions stay readable until compaction; revs_info lists the history.
  assert.equal((await db.get('doc1', { rev: first.rev })).n, 1);
  const withInfo = await db.get('doc1', { revs_info: true });
  assert.deepEqual(withInfo._revs_info.map((r) => r.rev), [second.rev, first.rev]);
  const withRevs = await db.get('doc1', { revs: true });
  assert.equal(withRevs._revisions.start, 2);
  assert.equal(withRevs._revisions.ids.length, 2);
  // Delete with the current revision.
  const gone = await db.destroy('doc1', second.rev);
  assert.equal(gone.ok, true);
  assert.match(gone.rev, /^3-/);
  await rejectsWith(db.get('doc1'), 404, 'not_found');
  await assert.rejects(db.get('doc1'), (e) => e.reason === 'deleted');
  await rejectsWith(db.get('never-was'), 404, 'not_found');
  await assert.rejects(db.get('never-was'), (e) => e.reason === 'missing');
  await rejectsWith(db.head('never-was'), 404);
  // A deleted document can be recreated without a revision.
  const again = await db.insert({ n: 4 }, 'doc1');
  assert.match(again.rev, /^4-/);
  const info = await db.info();
  assert.equal(info.doc_count, 2);
  assert.equal(info.doc_del_count, 0);
  // Document ids that need escaping go through nano's encodeURIComponent.
  await db.insert({ odd: true }, 'with/slash and space+plus');
  assert.equal((await db.get('with/slash and space+plus')).odd, true);
});

test('documents: conflicting revisions (new_edits=false), _conflicts and resolution', async (t) => {
  const { db } = await freshDb(t, 'nano-conflicts');
  const base = await db.insert({ v: 'base' }, 'c');
  // Two branches from the same parent, as replication would write them.
  const hashA = 'a'.repeat(32);
  const hashB = 'b'.repeat(32);
  const parent = base.rev.split('-')[1];
  const written = await db.bulk({
    new_edits: false,
    docs: [
      { _id: 'c', _rev: `2-${hashA}`, v: 'A', _revisions: { start: 2, ids: [hashA, parent] } },
      { _id: 'c', _rev: `2-${hashB}`, v: 'B', _revisions: { start: 2, ids: [hashB, parent] } },
    ],
  });
  assert.equal(written.filter((r) => r.error).length, 0);
  // The winner is the revision with the highest hash; the loser is listed in _conflicts.
  const winner = await db.get('c', { conflicts: true });
  assert.equal(winner._rev, `2-${hashB}`);
  assert.equal(winner.v, 'B');
  assert.deepEqual(winner._conflicts, [`2-${hashA}`]);
  const loser = await db.get('c', { rev: `2-${hashA}` });
  assert.equal(loser.v, 'A');
  // Resolve by deleting the losing branch.
  await db.destroy('c', `2-${hashA}`);
  const resolved = await db.get('c', { conflicts: true });
  assert.equal(resolved._conflicts, undefined);
  assert.equal(resolved._rev, `2-${hashB}`);
});

test('bulk: _bulk_docs with mixed results, fetch and fetchRevs', async (t) => {
  const { db } = await freshDb(t, 'nano-bulk');
  const res = await db.bulk({ docs: [{ _id: 'a', n: 1 }, { _id: 'b', n: 2 }, { n: 3 }] });
  assert.equal(res.length, 3);
  assert.ok(res.every((r) => r.ok && r.rev.startsWith('1-')));
  const [a, b] = res;
  // Second round: a good update, a stale create (conflict), a deletion, a new doc.
  const res2 = await db.bulk({
    docs: [
      { _id: 'a', _rev: a.rev, n: 10 },
      { _id: 'b', n: 20 },
      { _id: res[2].id, _rev: res[2].rev, _deleted: true },
      { _id: 'd', n: 4 },
    ],
  });
  assert.equal(res2[0].ok, true);
  assert.equal(res2[1].id, 'b');
  assert.equal(res2[1].error, 'conflict');
  assert.equal(res2[2].ok, true);
  assert.equal(res2[3].ok, true);
  assert.equal((await db.get('a')).n, 10);
  assert.equal((await db.get('b'))._rev, b.rev);
  // fetch = POST _all_docs with include_docs.
  const fetched = await db.fetch({ keys: ['a', 'd', 'missing', res[2].id] });
  assert.equal(fetched.rows.length, 4);
  assert.equal(fetched.rows[0].doc.n, 10);
  assert.equal(fetched.rows[1].doc.n, 4);
  assert.equal(fetched.rows[2].error, 'not_found');
  assert.equal(fetched.rows[3].value.deleted, true);
  assert.equal(fetched.rows[3].doc, null);
  const revs = await db.fetchRevs({ keys: ['a', 'b'] });
  assert.equal(revs.rows[0].value.rev, res2[0].rev);
  assert.equal(revs.rows[1].value.rev, b.rev);
  assert.equal(revs.rows[0].doc, undefined);
});

test('list: _all_docs with include_docs, keys, ranges, limit/skip, descending', async (t) => {
  const { db } = await freshDb(t, 'nano-list');
  const ids = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig'];
  await db.bulk({ docs: ids.map((id, i) => ({ _id: id, i })) });
  const all = await db.list();
  assert.equal(all.total_rows, 6);
  assert.equal(all.offset, 0);
  assert.deepEqual(all.rows.map((r) => r.id), ids);
  assert.ok(all.rows.every((r) => r.key === r.id && r.value.rev.startsWith('1-') && r.doc === undefined));
  const withDocs = await db.list({ include_docs: true });
  assert.deepEqual(withDocs.rows.map((r) => r.doc.i), [0, 1, 2, 3, 4, 5]);
  const keyed = await db.list({ keys: ['fig', 'nope', 'apple'], include_docs: true });
  assert.deepEqual(keyed.rows.map((r) => r.key), ['fig', 'nope', 'apple']);
  assert.equal(keyed.rows[0].doc.i, 5);
  assert.equal(keyed.rows[1].error, 'not_found');
  assert.equal(keyed.rows[2].doc.i, 0);
  const range = await db.list({ startkey: 'b', endkey: 'd\ufff0' });
  assert.deepEqual(range.rows.map((r) => r.id), ['banana', 'cherry', 'date']);
  const exclusive = await db.list({ startkey: 'banana', endkey: 'date', inclusive_end: false });
  assert.deepEqual(exclusive.rows.map((r) => r.id), ['banana', 'cherry']);
  const page = await db.list({ limit: 2, skip: 1 });
  assert.deepEqual(page.rows.map((r) => r.id), ['banana', 'cherry']);
  assert.equal(page.offset, 1);
  const desc = await db.list({ descending: true, limit: 2 });
  assert.deepEqual(desc.rows.map((r) => r.id), ['fig', 'elder']);
  const one = await db.list({ key: 'cherry' });
  assert.deepEqual(one.rows.map((r) => r.id), ['cherry']);
});

// Shared fixture for the view tests: a design doc with map/reduce views and ten documents.
async function viewFixture(t) {
  const { name, db } = await freshDb(t, 'nano-views');
  await db.insert({
    views: {
      by_type: { map: 'function (doc) { if (doc.type) emit(doc.type, doc.n); }', reduce: '_sum' },
      count_type: { map: 'function (doc) { if (doc.type) emit(doc.type, null); }', reduce: '_count' },
      by_date: { map: 'function (doc) { if (doc.date) emit(doc.date, 1); }', reduce: '_count' },
      no_reduce: { map: 'function (doc) { if (doc.type) emit([doc.type, doc.n], {n: doc.n}); }' },
    },
  }, '_design/stats');
  const docs = [];
  for (let i = 1; i <= 10; i++) {
    const type = ['a', 'b', 'c'][i % 3];
    docs.push({ _id: `d${String(i).padStart(2, '0')}`, type, n: i, date: [2020 + (i % 2), i % 4, i] });
  }
  await db.bulk({ docs });
  // Types: a = {3,6,9}, b = {1,4,7,10}, c = {2,5,8}.
  return { name, db };
}

test('views: db.view with reduce (_sum/_count), group, reduce=false, ranges, include_docs', async (t) => {
  const { db } = await viewFixture(t);
  const total = await db.view('stats', 'by_type');
  assert.deepEqual(total.rows, [{ key: null, value: 55 }]);
  const count = await db.view('stats', 'count_type');
  assert.deepEqual(count.rows, [{ key: null, value: 10 }]);
  const grouped = await db.view('stats', 'by_type', { group: true });
  assert.deepEqual(grouped.rows, [{ key: 'a', value: 18 }, { key: 'b', value: 22 }, { key: 'c', value: 15 }]);
  const groupedCount = await db.view('stats', 'count_type', { group: true });
  assert.deepEqual(groupedCount.rows.map((r) => r.value), [3, 4, 3]);
  const raw = await db.view('stats', 'by_type', { reduce: false });
  assert.equal(raw.total_rows, 10);
  assert.equal(raw.rows.length, 10);
  assert.deepEqual(raw.rows.slice(0, 3), [
    { id: 'd03', key: 'a', value: 3 }, { id: 'd06', key: 'a', value: 6 }, { id: 'd09', key: 'a', value: 9 },
  ]);
  const range = await db.view('stats', 'by_type', { startkey: 'b', endkey: 'c', reduce: false });
  assert.deepEqual(range.rows.map((r) => r.id), ['d01', 'd04', 'd07', 'd10', 'd02', 'd05', 'd08']);
  const rangeReduced = await db.view('stats', 'by_type', { startkey: 'b', endkey: 'c' });
  assert.deepEqual(rangeReduced.rows, [{ key: null, value: 37 }]);
  const rangeGrouped = await db.view('stats', 'by_type', { startkey: 'b', group: true });
  assert.deepEqual(rangeGrouped.rows, [{ key: 'b', value: 22 }, { key: 'c', value: 15 }]);
  const byKey = await db.view('stats', 'by_type', { key: 'c', reduce: false, include_docs: true });
  assert.deepEqual(byKey.rows.map((r) => r.doc.n), [2, 5, 8]);
  const desc = await db.view('stats', 'by_type', { reduce: false, descending: true, limit: 2, skip: 1 });
  assert.deepEqual(desc.rows.map((r) => r.id), ['d05', 'd02']);
  const levels = await db.view('stats', 'by_date', { group_level: 1 });
  assert.deepEqual(levels.rows, [{ key: [2020], value: 5 }, { key: [2021], value: 5 }]);
  const levels2 = await db.view('stats', 'by_date', { group_level: 2, startkey: [2021], endkey: [2021, {}] });
  assert.deepEqual(levels2.rows, [{ key: [2021, 1], value: 3 }, { key: [2021, 3], value: 2 }]);
  const compound = await db.view('stats', 'no_reduce', { startkey: ['b', 4], endkey: ['b', 7] });
  assert.deepEqual(compound.rows.map((r) => r.value.n), [4, 7]);
  await rejectsWith(db.view('stats', 'no_reduce', { group: true }), 400, 'query_parse_error');
  await rejectsWith(db.view('stats', 'missing_view'), 404, 'not_found');
  await rejectsWith(db.view('nodesign', 'v'), 404, 'not_found');
});

test('views: db.view with keys (POST body) combined with query-string options', async (t) => {
  const { db } = await viewFixture(t);
  // nano POSTs {"keys": [...]} and puts the other options in the query string.
  const rows = await db.view('stats', 'by_type', { keys: ['c', 'a'], reduce: false });
  assert.deepEqual(rows.rows.map((r) => r.id), ['d02', 'd05', 'd08', 'd03', 'd06', 'd09']);
  const grouped = await db.view('stats', 'by_type', { keys: ['c', 'a', 'zzz'], group: true });
  assert.deepEqual(grouped.rows, [{ key: 'c', value: 15 }, { key: 'a', value: 18 }]);
  const docs = await db.view('stats', 'count_type', { keys: ['b'], reduce: false, include_docs: true, limit: 2 });
  assert.deepEqual(docs.rows.map((r) => r.doc.n), [1, 4]);
});

// nano's db.view({queries}) posts to _view/<name>, which CouchDB 3 refuses ("The `queries`
// parameter is no longer supported at this endpoint"); the 3.x endpoint is _view/<name>/queries.
test('views: multi-query POST to _view/<name>/queries (nano.request)', async (t) => {
  const { name } = await viewFixture(t);
  const multi = await couch.request({
    db: name, method: 'POST', path: '_design/stats/_view/by_type/queries',
    body: {
      queries: [
        { keys: ['b'], reduce: false },
        { group: true, startkey: 'b' },
        { reduce: false, limit: 1, descending: true },
      ],
    },
  });
  assert.equal(multi.results.length, 3);
  assert.deepEqual(multi.results[0].rows.map((r) => r.id), ['d01', 'd04', 'd07', 'd10']);
  assert.deepEqual(multi.results[1].rows, [{ key: 'b', value: 22 }, { key: 'c', value: 15 }]);
  assert.deepEqual(multi.results[2].rows.map((r) => r.id), ['d08']);
});

test('views: POST body carrying keys together with reduce=false (nano.request)', async (t) => {
  const { name } = await viewFixture(t);
  const res = await couch.request({
    db: name, method: 'POST', path: '_design/stats/_view/by_type', body: { keys: ['c', 'a'], reduce: false },
  });
  assert.deepEqual(res.rows.map((r) => r.id), ['d02', 'd05', 'd08', 'd03', 'd06', 'd09']);
});

test('views: POST body carrying group=true (nano.request)', async (t) => {
  const { name } = await viewFixture(t);
  const res = await couch.request({
    db: name, method: 'POST', path: '_design/stats/_view/by_type', body: { group: true },
  });
  assert.deepEqual(res.rows, [{ key: 'a', value: 18 }, { key: 'b', value: 22 }, { key: 'c', value: 15 }]);
});

test('views: the index follows document updates and deletions', async (t) => {
  const { db } = await viewFixture(t);
  assert.deepEqual((await db.view('stats', 'by_type')).rows[0].value, 55);
  const d01 = await db.get('d01');
  await db.insert({ ...d01, n: 101 });
  const d02 = await db.get('d02');
  await db.destroy('d02', d02._rev);
  await db.insert({ type: 'z', n: 1000 }, 'new');
  const grouped = await db.view('stats', 'by_type', { group: true });
  assert.deepEqual(grouped.rows, [
    { key: 'a', value: 18 }, { key: 'b', value: 122 }, { key: 'c', value: 13 }, { key: 'z', value: 1000 },
  ]);
  // A changed map function rebuilds the index.
  const ddoc = await db.get('_design/stats');
  ddoc.views.by_type.map = 'function (doc) { if (doc.type) emit(doc.type, doc.n * 2); }';
  await db.insert(ddoc);
  assert.deepEqual((await db.view('stats', 'by_type')).rows[0].value, 2 * (55 + 100 - 2 + 1000));
});

test('mango: db.find without an index (selector, fields, sort by _id, limit/skip, bookmark)', async (t) => {
  const { db } = await freshDb(t, 'nano-find');
  const docs = [];
  for (let i = 0; i < 20; i++) docs.push({ _id: `p${String(i).padStart(2, '0')}`, n: i, tag: i % 2 ? 'odd' : 'even', name: `item ${i}` });
  await db.bulk({ docs });
  const found = await db.find({ selector: { tag: 'odd', n: { $gt: 10 } }, fields: ['_id', 'n'] });
  assert.deepEqual(found.docs, [{ _id: 'p11', n: 11 }, { _id: 'p13', n: 13 }, { _id: 'p15', n: 15 }, { _id: 'p17', n: 17 }, { _id: 'p19', n: 19 }]);
  assert.equal(typeof found.bookmark, 'string');
  const inList = await db.find({ selector: { n: { $in: [3, 7, 99] } }, fields: ['_id'] });
  assert.deepEqual(inList.docs.map((d) => d._id), ['p03', 'p07']);
  const regex = await db.find({ selector: { name: { $regex: '^item 1[0-2]$' } }, fields: ['n'] });
  assert.deepEqual(regex.docs.map((d) => d.n).sort((x, y) => x - y), [10, 11, 12]);
  const combined = await db.find({ selector: { $or: [{ n: 0 }, { $and: [{ tag: 'even' }, { n: { $gte: 16 } }] }] }, fields: ['_id'] });
  assert.deepEqual(combined.docs.map((d) => d._id), ['p00', 'p16', 'p18']);
  const sorted = await db.find({ selector: { _id: { $gt: null } }, sort: [{ _id: 'desc' }], limit: 3, fields: ['_id'] });
  assert.deepEqual(sorted.docs.map((d) => d._id), ['p19', 'p18', 'p17']);
  const page1 = await db.find({ selector: { tag: 'even' }, limit: 4, fields: ['_id'] });
  assert.deepEqual(page1.docs.map((d) => d._id), ['p00', 'p02', 'p04', 'p06']);
  const page2 = await db.find({ selector: { tag: 'even' }, limit: 4, fields: ['_id'], bookmark: page1.bookmark });
  assert.deepEqual(page2.docs.map((d) => d._id), ['p08', 'p10', 'p12', 'p14']);
  const skipped = await db.find({ selector: { tag: 'even' }, skip: 8, fields: ['_id'] });
  assert.deepEqual(skipped.docs.map((d) => d._id), ['p16', 'p18']);
  const whole = await db.find({ selector: { n: 5 } });
  assert.equal(whole.docs.length, 1);
  assert.equal(whole.docs[0].name, 'item 5');
  assert.match(whole.docs[0]._rev, /^1-/);
  await rejectsWith(db.find({ selector: { n: { $bogus: 1 } } }), 400);
});

test('mango: db.createIndex, find through it, db.index listing and deletion', async (t) => {
  const { db } = await freshDb(t, 'nano-index');
  await db.bulk({ docs: [{ _id: 'one', n: 1 }, { _id: 'three', n: 3 }, { _id: 'two', n: 2 }, { _id: 'none' }] });
  const definition = { index: { fields: ['n'] }, name: 'n-index' };
  const made = await db.createIndex(definition);
  assert.equal(made.result, 'created');
  assert.equal(made.name, 'n-index');
  assert.match(made.id, /^_design\//);
  assert.equal((await db.createIndex(definition)).result, 'exists');
  const found = await db.find({ selector: { n: { $gt: 1 } }, sort: [{ n: 'desc' }], use_index: made.id });
  assert.deepEqual(found.docs.map((d) => d._id), ['three', 'two']);
  assert.equal(found.warning, undefined, 'an index served the query');
  const sorted = await db.find({ selector: {}, sort: ['n'], fields: ['_id', 'n'] });
  assert.deepEqual(sorted.docs, [{ _id: 'one', n: 1 }, { _id: 'two', n: 2 }, { _id: 'three', n: 3 }]);
  const listed = await db.server.request({ db: db.config.db, path: '_index' });
  assert.deepEqual(listed.indexes.map((i) => i.name), ['_all_docs', 'n-index']);
  assert.deepEqual(listed.indexes[1].def, { fields: [{ n: 'asc' }] });
  await db.server.request({ db: db.config.db, method: 'DELETE', path: `_index/${made.id}/json/n-index` });
  await rejectsWith(db.find({ selector: {}, sort: ['n'] }), 400, 'no_usable_index');
});

test('attachments: db.attachment.insert/get/destroy, stubs, attachments=true', async (t) => {
  const { db } = await freshDb(t, 'nano-atts');
  const bytes = crypto.randomBytes(200 * 1024);
  // Inserting an attachment into a missing document creates the document.
  const put = await db.attachment.insert('photo', 'pic.bin', bytes, 'application/octet-stream');
  assert.equal(put.ok, true);
  assert.match(put.rev, /^1-/);
  const got = await db.attachment.get('photo', 'pic.bin');
  assert.ok(Buffer.isBuffer(got));
  assert.equal(Buffer.compare(got, bytes), 0);
  // A second attachment needs the current revision.
  await rejectsWith(db.attachment.insert('photo', 'note.txt', 'hello, nano', 'text/plain'), 409, 'conflict');
  const put2 = await db.attachment.insert('photo', 'note.txt', 'hello, nano', 'text/plain', { rev: put.rev });
  assert.match(put2.rev, /^2-/);
  const text = await db.attachment.get('photo', 'note.txt');
  assert.equal(text.toString(), 'hello, nano');
  const doc = await db.get('photo');
  const stub = doc._attachments['pic.bin'];
  assert.equal(stub.stub, true);
  assert.equal(stub.length, bytes.length);
  assert.equal(stub.content_type, 'application/octet-stream');
  assert.equal(stub.digest, `md5-${crypto.createHash('md5').update(bytes).digest('base64')}`);
  assert.equal(doc._attachments['note.txt'].content_type, 'text/plain');
  const inline = await db.get('photo', { attachments: true });
  assert.equal(Buffer.from(inline._attachments['note.txt'].data, 'base64').toString(), 'hello, nano');
  assert.equal(Buffer.compare(Buffer.from(inline._attachments['pic.bin'].data, 'base64'), bytes), 0);
  // A streamed download gives the same bytes.
  const chunks = [];
  for await (const chunk of db.attachment.getAsStream('photo', 'pic.bin')) chunks.push(chunk);
  assert.equal(Buffer.compare(Buffer.concat(chunks), bytes), 0);
  // Updating the document with its stubs keeps the attachments.
  const put3 = await db.insert({ ...doc, extra: true });
  assert.equal(Buffer.compare(await db.attachment.get('photo', 'pic.bin'), bytes), 0);
  // Destroy one attachment; the other stays.
  await rejectsWith(db.attachment.destroy('photo', 'pic.bin', { rev: put.rev }), 409, 'conflict');
  const del = await db.attachment.destroy('photo', 'pic.bin', { rev: put3.rev });
  assert.equal(del.ok, true);
  await rejectsWith(db.attachment.get('photo', 'pic.bin'), 404, 'not_found');
  const after = await db.get('photo');
  assert.deepEqual(Object.keys(after._attachments), ['note.txt']);
  assert.equal(after.extra, true);
  // Names with spaces and unicode.
  const put4 = await db.attachment.insert('photo', encodeURIComponent('r\u00e9sum\u00e9 v2.txt'), 'cv', 'text/plain', { rev: del.rev });
  assert.equal(put4.ok, true);
  assert.ok(Object.keys((await db.get('photo'))._attachments).includes('r\u00e9sum\u00e9 v2.txt'));
  assert.equal((await db.attachment.get('photo', encodeURIComponent('r\u00e9sum\u00e9 v2.txt'))).toString(), 'cv');
});

test('attachments: db.multipart.insert and db.multipart.get', async (t) => {
  const { db } = await freshDb(t, 'nano-multipart');
  const png = crypto.randomBytes(70000);
  const made = await db.multipart.insert({ title: 'with files' }, [
    { name: 'image.png', data: png, content_type: 'image/png' },
    { name: 'readme.txt', data: 'multipart text body', content_type: 'text/plain' },
  ], 'mp');
  assert.equal(made.ok, true);
  assert.equal(made.id, 'mp');
  const doc = await db.get('mp');
  assert.equal(doc.title, 'with files');
  assert.equal(doc._attachments['image.png'].length, png.length);
  assert.equal(doc._attachments['image.png'].content_type, 'image/png');
  assert.equal(Buffer.compare(await db.attachment.get('mp', 'image.png'), png), 0);
  assert.equal((await db.attachment.get('mp', 'readme.txt')).toString(), 'multipart text body');
  // Updating through multipart again, with the revision in the document.
  const made2 = await db.multipart.insert({ ...doc, title: 'v2' }, [
    { name: 'readme.txt', data: 'second version', content_type: 'text/plain' },
  ], 'mp');
  assert.match(made2.rev, /^2-/);
  const doc2 = await db.get('mp');
  assert.equal(doc2.title, 'v2');
  assert.deepEqual(Object.keys(doc2._attachments).sort(), ['image.png', 'readme.txt']);
  assert.equal((await db.attachment.get('mp', 'readme.txt')).toString(), 'second version');
  // multipart.get asks for multipart/related: the JSON document, then each attachment.
  const body = await db.multipart.get('mp');
  // (Text attachments may come back gzip-encoded, so only the JSON part and the part headers
  // are checked here.)
  const textBody = Buffer.isBuffer(body) ? body.toString('latin1') : body;
  assert.ok(textBody.startsWith('--'), 'a multipart/related body starts with its boundary');
  assert.ok(textBody.includes('"title":"v2"'), 'the JSON part holds the document');
  assert.ok(/filename="image.png"/.test(textBody) && /filename="readme.txt"/.test(textBody), 'one part per attachment');
});

test('changes: db.changes normal feed (since, include_docs, limit, descending, doc_ids)', async (t) => {
  const { db } = await freshDb(t, 'nano-changes');
  await db.bulk({ docs: [{ _id: 'one' }, { _id: 'two' }, { _id: 'three' }] });
  const all = await db.changes();
  assert.deepEqual(all.results.map((r) => r.id).sort(), ['one', 'three', 'two']);
  assert.ok(all.results.every((r) => r.changes[0].rev.startsWith('1-') && r.seq));
  assert.ok(all.last_seq);
  assert.equal(all.pending, 0);
  const since = all.last_seq;
  const one = await db.get('one');
  await db.destroy('one', one._rev);
  await db.insert({ _id: 'four', x: 4 });
  const later = await db.changes({ since, include_docs: true });
  assert.deepEqual(later.results.map((r) => r.id).sort(), ['four', 'one']);
  const deleted = later.results.find((r) => r.id === 'one');
  assert.equal(deleted.deleted, true);
  assert.equal(later.results.find((r) => r.id === 'four').doc.x, 4);
  const limited = await db.changes({ limit: 2 });
  assert.equal(limited.results.length, 2);
  assert.equal(limited.pending, 2);
  // (CouchDB's sequence is only ordered per shard, so which change comes first is not fixed.)
  const desc = await db.changes({ descending: true, limit: 1 });
  assert.equal(desc.results.length, 1);
  const ids = await db.changes({ filter: '_doc_ids', doc_ids: JSON.stringify(['two', 'four']) });
  assert.deepEqual(ids.results.map((r) => r.id).sort(), ['four', 'two']);
  const now = await db.changes({ since: 'now' });
  assert.deepEqual(now.results, []);
});

test('changes: longpoll through db.changes returns when a document is written', async (t) => {
  const { db } = await freshDb(t, 'nano-longpoll');
  await db.insert({ _id: 'before' });
  const { last_seq: since } = await db.changes();
  const started = Date.now();
  const poll = db.changes({ feed: 'longpoll', since, timeout: 10000, include_docs: true });
  await new Promise((r) => setTimeout(r, 300));
  await db.insert({ _id: 'during', v: 1 });
  const res = await poll;
  assert.ok(Date.now() - started < 9000, 'the longpoll answered as soon as the change happened');
  assert.deepEqual(res.results.map((r) => r.id), ['during']);
  assert.equal(res.results[0].doc.v, 1);
  // A longpoll with nothing new answers empty after its timeout.
  const idle = await db.changes({ feed: 'longpoll', since: res.last_seq, timeout: 300 });
  assert.deepEqual(idle.results, []);
});

test('changes: db.changesReader start (live), get (finite), spool and selector', async (t) => {
  const { db } = await freshDb(t, 'nano-reader');
  await db.bulk({ docs: Array.from({ length: 25 }, (_, i) => ({ _id: `r${String(i).padStart(2, '0')}`, even: i % 2 === 0 })) });

  // get: reads everything from the start in batches, then ends after an empty longpoll
  // (a short timeout keeps that last, empty longpoll from waiting the default minute).
  const batches = [];
  const ended = await new Promise((resolve, reject) => {
    db.changesReader.get({ since: 0, batchSize: 10, timeout: 1000 })
      .on('batch', (b) => batches.push(b.map((c) => c.id)))
      .on('error', reject)
      .on('end', resolve);
  });
  assert.ok(ended);
  assert.deepEqual(batches.map((b) => b.length), [10, 10, 5]);
  assert.equal(new Set(batches.flat()).size, 25);

  // spool: one long normal-feed request, streamed.
  const spooled = [];
  await new Promise((resolve, reject) => {
    db.changesReader.spool({ since: 0, batchSize: 7 })
      .on('batch', (b) => spooled.push(...b.map((c) => c.id)))
      .on('error', reject)
      .on('end', resolve);
  });
  assert.equal(spooled.length, 25);

  // start: a live longpoll loop from "now" that sees new writes, with a selector filter.
  const reader = db.changesReader;
  const seen = new Promise((resolve, reject) => {
    const got = [];
    reader.start({ since: 'now', includeDocs: true, selector: { even: true }, timeout: 5000 })
      .on('change', (c) => {
        got.push(c.id);
        if (c.id === 'live2') resolve(got);
      })
      .on('error', (e) => { if (e.name !== 'AbortError' && e.statusCode) reject(e); });
  });
  await new Promise((r) => setTimeout(r, 300));
  await db.insert({ _id: 'live1', even: false });
  await db.insert({ _id: 'live2', even: true });
  const got = await seen;
  reader.stop();
  assert.deepEqual(got, ['live2']);
});

test('replication: nano.db.replicate / db.replicate', async (t) => {
  const { name: source, db } = await freshDb(t, 'nano-repl-src');
  const { name: target } = await freshDb(t, 'nano-repl-tgt');
  await db.bulk({ docs: [{ _id: 'r1' }, { _id: 'r2' }] });
  const res = await couch.db.replicate(source, target);
  assert.equal(res.ok, true);
  assert.equal((await couch.use(target).info()).doc_count, 2);
  await db.insert({ _id: 'r3' });
  const again = await db.replicate(target);
  assert.equal(again.ok, true);
  assert.equal(again.history[0].docs_written, 1);
  assert.equal((await couch.use(target).info()).doc_count, 3);
});
