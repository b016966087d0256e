"""python-cloudant (PyPI `cloudant` 2.15.0, the legacy library) against a server at SETTEE_URL.

Used as its documentation shows: `CouchDB(user, password, url=..., connect=True,
auto_renew=True)`, which logs in with a `_session` cookie (form-encoded `name`/`password`)
and sends that cookie on every request. Admin credentials come from SETTEE_USER /
SETTEE_PASSWORD. Every check runs; the script prints a summary and exits 1 if any failed.
Fixtures a check does not test are written with plain HTTP (check_harness.Raw).
"""
import sys
import threading
import time

from requests.exceptions import HTTPError

from cloudant.client import CouchDB
from cloudant.database import CouchDatabase
from cloudant.design_document import DesignDocument
from cloudant.document import Document
from cloudant.error import CloudantClientException, CloudantDatabaseException
from cloudant.index import SpecialIndex
from cloudant.query import Query
from cloudant.replicator import Replicator
from cloudant.result import Result
from cloudant.scheduler import Scheduler
from cloudant.view import View

from check_harness import Cases, Exchanges, Raw, env, expect_http_error, run_checks, run_id, wait_until

CHECKS = []


def check(fn):
    CHECKS.append((fn.__name__, fn))
    return fn


class Ctx:
    def __init__(self):
        self.url, self.user, self.password = env()
        self.raw = Raw(self.url, self.user, self.password)
        self.vendor = self.raw.vendor()
        self.run = run_id()
        self.dbs = []
        self.exchanges = Exchanges()
        self.client = None

    def name(self, what):
        n = f"cloudant-{self.run}-{what}"
        self.dbs.append(n)
        return n

    def db(self, what):
        """A fresh database made through the client under test."""
        return self.client.create_database(self.name(what), throw_on_exists=True)

    def fixture_db(self, what, docs=()):
        """A fresh database with documents, written with plain HTTP."""
        name = self.name(what)
        self.raw.put_db(name)
        if docs:
            self.raw.bulk(name, list(docs))
        return CouchDatabase(self.client, name)

    @property
    def settee(self):
        return self.vendor == "Settee"


# ---------------------------------------------------------------- session and server


@check
def cookie_session_login(ctx):
    ctx.client = CouchDB(ctx.user, ctx.password, url=ctx.url, connect=True, auto_renew=True, timeout=30)
    ctx.client.r_session.hooks["response"].insert(0, ctx.exchanges.hook)
    cookie = ctx.client.session_cookie()
    assert cookie, "no AuthSession cookie after login"
    info = ctx.client.session()
    assert info["ok"] is True, info
    assert info["userCtx"]["name"] == ctx.user, info
    assert "_admin" in info["userCtx"]["roles"], info
    assert info["info"]["authenticated"] == "cookie", info
    assert "cookie" in info["info"]["authentication_handlers"], info


@check
def server_metadata_and_all_dbs(ctx):
    meta = ctx.client.metadata()
    assert meta["couchdb"] == "Welcome", meta
    assert meta["version"].startswith("3."), meta
    assert isinstance(ctx.client.features(), list)
    dbs = ctx.client.all_dbs()
    assert "_users" in dbs and "_replicator" in dbs, dbs
    assert dbs == sorted(dbs), dbs


@check
def create_and_delete_database(ctx):
    name = ctx.name("lifecycle")
    db = ctx.client.create_database(name, throw_on_exists=True)
    assert db.exists()
    assert name in ctx.client.all_dbs()
    meta = db.metadata()
    assert meta["db_name"] == name and meta["doc_count"] == 0, meta
    assert db.doc_count() == 0
    again = expect_http_error(lambda: ctx.client.create_database(name, throw_on_exists=True), 412,
                              status_of=lambda e: e.status_code, body_of=lambda e: {})
    assert isinstance(again, CloudantClientException), again
    assert ctx.client[name].database_name == name
    ctx.client.delete_database(name)
    assert not db.exists()
    assert name not in ctx.client.all_dbs()
    gone = expect_http_error(lambda: ctx.client.delete_database(name), 404,
                             status_of=lambda e: e.status_code, body_of=lambda e: {})
    assert isinstance(gone, CloudantClientException), gone
    try:
        ctx.client[name]
        raise AssertionError("a deleted database must not be found")
    except KeyError:
        pass
    bad = CouchDatabase(ctx.client, "Bad_Name")
    expect_http_error(lambda: bad.create(throw_on_exists=True), 400,
                      status_of=lambda e: e.status_code, body_of=lambda e: {})


# ---------------------------------------------------------------- documents


@check
def document_crud_and_conflicts(ctx):
    db = ctx.db("docs")
    doc = db.create_document({"_id": "ann", "type": "person", "name": "Ann"})
    assert doc["_rev"].startswith("1-"), doc
    assert "ann" in db
    rev1 = doc["_rev"]

    fetched = Document(db, "ann")
    fetched.fetch()
    assert fetched["name"] == "Ann" and fetched["_rev"] == rev1, dict(fetched)

    fetched["name"] = "Anne"
    fetched.save()
    assert fetched["_rev"].startswith("2-"), dict(fetched)

    stale = Document(db, "ann")
    stale.update({"_rev": rev1, "name": "stale"})
    e = expect_http_error(stale.save, 409, "conflict")
    assert e.response.json()["reason"] == "Document update conflict.", e.response.json()
    expect_http_error(stale.delete, 409, "conflict")

    # create_document on an existing id: 409, surfaced only with throw_on_exists
    try:
        db.create_document({"_id": "ann", "name": "dup"}, throw_on_exists=True)
        raise AssertionError("creating an existing document must fail")
    except CloudantDatabaseException as ex:
        assert ex.status_code == 409, ex

    # server-generated ids (POST /db)
    anon = db.create_document({"type": "anon"})
    assert anon["_id"] and anon["_rev"].startswith("1-"), dict(anon)
    new = db.new_document()
    assert new["_id"] and new["_id"] != anon["_id"]

    # context manager: fetch on enter, save on exit
    with Document(db, "ann") as d:
        d["age"] = 31
    again = Document(db, "ann")
    again.fetch()
    assert again["age"] == 31 and again["_rev"].startswith("3-"), dict(again)

    # update_field re-fetches and retries on conflict
    again.update_field(action=again.list_field_append, field="tags", value="x")
    again.fetch()
    assert again["tags"] == ["x"] and again["_rev"].startswith("4-"), dict(again)

    # unicode and slash ids
    odd = db.create_document({"_id": "a/b ü", "v": 1})
    got = Document(db, "a/b ü")
    got.fetch()
    assert got["v"] == 1 and got["_rev"] == odd["_rev"]

    again.delete()
    assert again == {"_id": "ann"}, dict(again)
    assert not Document(db, "ann").exists()
    expect_http_error(Document(db, "ann").fetch, 404, "not_found")
    assert db.doc_count() == 3, db.metadata()


@check
def bulk_docs(ctx):
    db = ctx.db("bulk")
    res = db.bulk_docs([{"_id": "a", "v": 1}, {"_id": "b", "v": 2}, {"v": 3}])
    assert len(res) == 3 and all(r.get("ok") and r["rev"].startswith("1-") for r in res), res
    assert res[0]["id"] == "a" and res[1]["id"] == "b" and res[2]["id"], res
    revs = {r["id"]: r["rev"] for r in res}

    res2 = db.bulk_docs([
        {"_id": "a", "_rev": revs["a"], "v": 10},          # update
        {"_id": "b", "v": 20},                              # no rev: conflict
        {"_id": "a", "_rev": revs["a"], "v": 11},          # stale after the first: conflict
        {"_id": res[2]["id"], "_rev": res[2]["rev"], "_deleted": True},
    ])
    assert res2[0]["ok"] and res2[0]["rev"].startswith("2-"), res2
    assert res2[1] == {"id": "b", "error": "conflict", "reason": "Document update conflict."}, res2
    assert res2[2]["error"] == "conflict", res2
    assert res2[3]["ok"] and res2[3]["rev"].startswith("2-"), res2
    assert db.doc_count() == 2
    a = Document(db, "a")
    a.fetch()
    assert a["v"] == 10


@check
def all_docs_and_iteration(ctx):
    db = ctx.fixture_db("alldocs", [{"_id": i, "n": n} for n, i in enumerate(["c", "a", "e", "b", "d"])])
    res = db.all_docs()
    assert [r["id"] for r in res["rows"]] == ["a", "b", "c", "d", "e"], res
    assert res["total_rows"] == 5 and res["offset"] == 0, res
    assert all(r["key"] == r["id"] and r["value"]["rev"].startswith("1-") for r in res["rows"]), res

    res = db.all_docs(include_docs=True, startkey="b", endkey="d")
    assert [r["doc"]["_id"] for r in res["rows"]] == ["b", "c", "d"], res
    assert res["rows"][0]["doc"]["n"] == 3, res

    res = db.all_docs(descending=True, limit=2, skip=1)
    assert [r["id"] for r in res["rows"]] == ["d", "c"], res

    res = db.all_docs(keys=["e", "zz", "a"], include_docs=True)   # POST _all_docs {"keys": [...]}
    rows = res["rows"]
    assert [r["key"] for r in rows] == ["e", "zz", "a"], res
    assert rows[1] == {"key": "zz", "error": "not_found"}, rows[1]
    assert rows[0]["doc"]["n"] == 2, rows[0]

    res = db.all_docs(inclusive_end=False, endkey="c")
    assert [r["id"] for r in res["rows"]] == ["a", "b"], res

    assert sorted(db.keys(remote=True)) == ["a", "b", "c", "d", "e"]
    db._fetch_limit = 2   # iterate in pages of two (startkey + limit)
    assert [d["_id"] for d in db] == ["a", "b", "c", "d", "e"]

    paged = Result(db.all_docs, page_size=2)
    assert [r["id"] for r in paged] == ["a", "b", "c", "d", "e"]
    assert [r["id"] for r in paged[1:3]] == ["b", "c"]
    assert [r["id"] for r in paged["c":"d"]] == ["c", "d"]


# ---------------------------------------------------------------- views

VIEW_DOCS = [
    {"_id": "a1", "type": "a", "n": 1},
    {"_id": "a2", "type": "a", "n": 2},
    {"_id": "b1", "type": "b", "n": 10},
    {"_id": "c1", "type": "c", "n": 100},
    {"_id": "c2", "type": "c", "n": 200},
    {"_id": "x", "other": True},
]


@check
def design_document_and_view_queries(ctx):
    db = ctx.fixture_db("views", VIEW_DOCS)
    ddoc = DesignDocument(db, "_design/stats")
    ddoc.add_view("by_type", "function (doc) { if (doc.type) { emit(doc.type, doc.n); } }", "_sum")
    ddoc.add_view("count", "function (doc) { if (doc.type) { emit(doc.type, null); } }", "_count")
    ddoc.add_view("js_sum", "function (doc) { if (doc.type) { emit(doc.type, doc.n); } }",
                  "function (keys, values, rereduce) { return sum(values); }")
    ddoc.save()
    assert ddoc["_rev"].startswith("1-")

    back = db.get_design_document("_design/stats")
    assert sorted(back.list_views()) == ["by_type", "count", "js_sum"], dict(back)
    assert isinstance(back.get_view("by_type"), View)
    assert back.get_view("by_type").reduce == "_sum"
    assert [r["id"] for r in db.design_documents()] == ["_design/stats"]
    assert db.list_design_documents() == ["_design/stats"]

    def q(view="by_type", **kw):
        return db.get_view_result("_design/stats", view, raw_result=True, **kw)["rows"]

    def ids(**kw):
        return [r["id"] for r in q(**kw)]

    c = Cases()
    c.eq("default (reduce)", q, [{"key": None, "value": 313}])
    c.eq("group=True", lambda: q(group=True),
         [{"key": "a", "value": 3}, {"key": "b", "value": 10}, {"key": "c", "value": 300}])
    c.eq("JS reduce group=True", lambda: q("js_sum", group=True),
         [{"key": "a", "value": 3}, {"key": "b", "value": 10}, {"key": "c", "value": 300}])
    c.eq("_count group=True", lambda: q("count", group=True),
         [{"key": "a", "value": 2}, {"key": "b", "value": 1}, {"key": "c", "value": 2}])
    c.eq("reduce=False", lambda: [(r["key"], r["id"], r["value"]) for r in q(reduce=False)],
         [("a", "a1", 1), ("a", "a2", 2), ("b", "b1", 10), ("c", "c1", 100), ("c", "c2", 200)])
    c.eq("startkey/endkey reduce=False", lambda: ids(reduce=False, startkey="b", endkey="c"),
         ["b1", "c1", "c2"])
    c.eq("inclusive_end=False", lambda: ids(reduce=False, startkey="a", endkey="c", inclusive_end=False),
         ["a1", "a2", "b1"])
    c.eq("startkey/endkey group=True", lambda: q(startkey="b", endkey="c", group=True),
         [{"key": "b", "value": 10}, {"key": "c", "value": 300}])
    # keys go in a POST body {"keys": [...]}, the other options in the query string
    c.eq("keys reduce=False", lambda: ids(reduce=False, keys=["c", "a"]), ["c1", "c2", "a1", "a2"])
    c.eq("keys group=True", lambda: q(group=True, keys=["c", "a", "zz"]),
         [{"key": "c", "value": 300}, {"key": "a", "value": 3}])
    # CouchDB 3.5 reduces a one-key `keys` fetch without group=true; two keys need group=true
    c.eq("keys (one key) reduced", lambda: q(keys=["c"]), [{"key": None, "value": 300}])
    c.run("keys (two keys) without group: 400 query_parse_error",
          lambda: expect_http_error(lambda: q(keys=["c", "a"]), 400, "query_parse_error"))
    c.eq("keys (two keys) without group: CouchDB's reason",
         lambda: expect_http_error(lambda: q(keys=["c", "a"]), 400).response.json()["reason"],
         "Multi-key fetches for reduce views must use `group=true`")
    c.eq("key include_docs", lambda: [(r["id"], r["doc"]["n"]) for r in q(reduce=False, key="b", include_docs=True)],
         [("b1", 10)])
    c.eq("descending limit", lambda: ids(reduce=False, descending=True, limit=2), ["c2", "c1"])
    c.eq("startkey_docid", lambda: ids(reduce=False, startkey="a", startkey_docid="a2", limit=2), ["a2", "b1"])
    c.eq("skip limit total_rows offset", lambda: {
        k: v for k, v in db.get_view_result("_design/stats", "by_type", raw_result=True, reduce=False,
                                            skip=1, limit=1).items() if k in ("total_rows", "offset")},
         {"total_rows": 5, "offset": 1})
    # Result objects: paging by startkey/startkey_docid, key access, slices
    c.eq("Result iteration, pages of 2",
         lambda: [r["id"] for r in db.get_view_result("_design/stats", "by_type", reduce=False, page_size=2)],
         ["a1", "a2", "b1", "c1", "c2"])
    c.eq("Result['c']",
         lambda: [r["id"] for r in db.get_view_result("_design/stats", "by_type", reduce=False)["c"]],
         ["c1", "c2"])
    c.eq("Result[1:3]",
         lambda: [r["id"] for r in db.get_view_result("_design/stats", "by_type", reduce=False)[1:3]],
         ["a2", "b1"])
    c.eq("grouped Result iteration, pages of 1",
         lambda: [(r["key"], r["value"]) for r in db.get_view_result("_design/stats", "by_type", group=True,
                                                                     page_size=1)],
         [("a", 3), ("b", 10), ("c", 300)])
    c.run("missing view: 404", lambda: expect_http_error(lambda: q("nope"), 404, "not_found"))

    def follows_updates():
        db.create_document({"_id": "b2", "type": "b", "n": 5})
        assert q(key="b") == [{"key": None, "value": 15}], q(key="b")
        # updating the design document rebuilds the view
        ddoc.update_view("by_type", "function (doc) { if (doc.type) { emit(doc.type, 1); } }", "_sum")
        ddoc.save()
        assert ddoc["_rev"].startswith("2-"), dict(ddoc)
        assert q(group=True) == [{"key": "a", "value": 2}, {"key": "b", "value": 2},
                                 {"key": "c", "value": 2}], q(group=True)

    c.run("the view follows document and design document updates", follows_updates)
    c.eq("view_cleanup", db.view_cleanup, {"ok": True})
    c.done()


@check
def local_documents(ctx):
    db = ctx.fixture_db("local")
    doc = Document(db, "_local/cfg")
    doc["v"] = 1
    doc.save()                       # not there yet: POST /db {"_id": "_local/cfg", ...}
    assert doc["_rev"].startswith("0-"), dict(doc)
    back = Document(db, "_local/cfg")
    back.fetch()
    assert back["v"] == 1, dict(back)
    back["v"] = 2
    back.save()
    assert db.all_docs()["rows"] == []
    back.delete()
    assert not Document(db, "_local/cfg").exists()


# ---------------------------------------------------------------- Mango

PEOPLE = [
    {"_id": "p1", "type": "person", "name": "Ann", "age": 30},
    {"_id": "p2", "type": "person", "name": "Bob", "age": 25},
    {"_id": "p3", "type": "person", "name": "Cid", "age": 40},
    {"_id": "t1", "type": "thing", "name": "Box"},
]


@check
def mango_query_without_index(ctx):
    db = ctx.fixture_db("mango", PEOPLE)
    query = Query(db, selector={"type": "person", "age": {"$gt": 26}}, fields=["_id", "name"])
    res = query()
    assert sorted(d["_id"] for d in res["docs"]) == ["p1", "p3"], res
    assert all(set(d) == {"_id", "name"} for d in res["docs"]), res
    assert "warning" in res, res     # CouchDB warns that no index matched
    assert isinstance(res.get("bookmark"), str), res

    # sorting on _id needs no index once the selector names _id (the _all_docs index)
    by_id = Query(db, selector={"_id": {"$gt": None}, "type": "person"}, fields=["_id", "name"])
    res = by_id(sort=[{"_id": "desc"}])
    assert [d["_id"] for d in res["docs"]] == ["p3", "p2", "p1"], res
    res = by_id(limit=1, skip=1, sort=[{"_id": "asc"}])
    assert res["docs"] == [{"_id": "p2", "name": "Bob"}], res
    res = db.get_query_result({"name": {"$regex": "^B"}}, raw_result=True, fields=["_id"])
    assert sorted(d["_id"] for d in res["docs"]) == ["p2", "t1"], res
    res = db.get_query_result({"$or": [{"age": 25}, {"name": "Box"}]}, raw_result=True)
    assert sorted(d["_id"] for d in res["docs"]) == ["p2", "t1"], res
    assert all("_rev" in d for d in res["docs"]), res

    # QueryResult iterates page by page with bookmarks
    pages = db.get_query_result({"type": "person"}, page_size=1)
    assert sorted(d["_id"] for d in pages) == ["p1", "p2", "p3"]
    assert sorted(d["_id"] for d in pages[0:2]) in (["p1", "p2"], ["p1", "p3"], ["p2", "p3"])

    e = expect_http_error(lambda: Query(db, selector={"type": "person"})(sort=["age"]), 400, "no_usable_index")
    assert "No index exists for this sort" in e.response.json()["reason"], e.response.json()


@check
def mango_index_creation(ctx):
    db = ctx.fixture_db("mangoidx", PEOPLE)
    indexes = db.get_query_indexes()
    assert len(indexes) == 1 and isinstance(indexes[0], SpecialIndex), indexes
    assert indexes[0].name == "_all_docs", indexes[0].as_a_dict()
    idx = db.create_query_index(design_document_id="_design/idx", index_name="by-age", fields=["age"])
    names = [i.name for i in db.get_query_indexes()]
    assert names == ["_all_docs", "by-age"], names
    res = Query(db, selector={"age": {"$gt": 0}}, fields=["_id"])(sort=[{"age": "asc"}],
                                                                 use_index="_design/idx")
    assert [d["_id"] for d in res["docs"]] == ["p2", "p1", "p3"], res
    db.delete_query_index("_design/idx", "json", "by-age")
    assert [i.name for i in db.get_query_indexes()] == ["_all_docs"]
    assert idx.name == "by-age"


# ---------------------------------------------------------------- attachments


@check
def attachments(ctx):
    db = ctx.fixture_db("atts", [{"_id": "doc", "v": 1}])
    doc = Document(db, "doc")
    res = doc.put_attachment("hello.txt", "text/plain", b"Hello, world")
    assert res["ok"] is True and res["id"] == "doc" and res["rev"].startswith("2-"), res
    first_rev = res["rev"]
    assert doc["_rev"] == res["rev"]
    stub = doc["_attachments"]["hello.txt"]
    assert stub["stub"] is True and stub["content_type"] == "text/plain" and stub["length"] == 12, stub
    assert stub["digest"].startswith("md5-"), stub

    assert doc.get_attachment("hello.txt") == "Hello, world"
    assert doc.get_attachment("hello.txt", attachment_type="binary") == b"Hello, world"

    blob = bytes(range(256)) * 4
    doc.put_attachment("blob.bin", "application/octet-stream", blob)
    assert doc.get_attachment("blob.bin") == blob
    doc.put_attachment("data.json", "application/json", b'{"k": [1, 2]}')
    assert doc.get_attachment("data.json") == {"k": [1, 2]}

    doc.put_attachment("hello.txt", "text/plain", b"Replaced")   # replace in place
    assert doc.get_attachment("hello.txt") == "Replaced"
    assert doc["_attachments"]["hello.txt"]["length"] == 8
    assert sorted(doc["_attachments"]) == ["blob.bin", "data.json", "hello.txt"]

    res = doc.delete_attachment("hello.txt")
    assert res["ok"] is True and res["rev"].startswith("6-"), res
    assert "hello.txt" not in doc.get("_attachments", {})
    doc.fetch()
    assert sorted(doc["_attachments"]) == ["blob.bin", "data.json"], doc["_attachments"]
    expect_http_error(lambda: doc.get_attachment("hello.txt"), 404, "not_found")
    assert doc["v"] == 1

    # stale If-Match on an attachment write is a conflict
    stale = ctx.raw.req("PUT", f"/{db.database_name}/doc/x.txt", data=b"x",
                        headers={"Content-Type": "text/plain", "If-Match": first_rev})
    assert stale.status_code == 409, stale.text


# ---------------------------------------------------------------- changes


@check
def changes_feed_normal(ctx):
    db = ctx.fixture_db("changes", [{"_id": i} for i in ("a", "b", "c")])
    feed = db.changes()
    seen = [c for c in feed]
    assert sorted(c["id"] for c in seen) == ["a", "b", "c"], seen
    assert all(c["changes"][0]["rev"].startswith("1-") and "seq" in c for c in seen), seen
    assert feed.last_seq, "the feed must end with last_seq"
    last = feed.last_seq

    assert list(db.changes(since=last)) == []
    raw_lines = list(db.changes(raw_data=True))
    assert raw_lines[0] == b'{"results":[', raw_lines

    docs = list(db.changes(include_docs=True))
    assert {c["doc"]["_id"] for c in docs} == {"a", "b", "c"}, docs
    limited = db.changes(limit=2)
    assert len(list(limited)) == 2 and limited.last_seq
    desc = [c["id"] for c in db.changes(descending=True)]
    assert sorted(desc) == ["a", "b", "c"] and len(desc) == 3, desc
    only = [c["id"] for c in db.changes(filter="_doc_ids", doc_ids=["b"])]
    assert only == ["b"], only

    b = Document(db, "b")
    b.fetch()
    b.delete()
    after = list(db.changes(since=last))
    assert len(after) == 1 and after[0]["id"] == "b" and after[0]["deleted"] is True, after
    assert after[0]["changes"][0]["rev"].startswith("2-"), after
    styles = list(db.changes(style="all_docs"))
    assert len(styles) == 3, styles


@check
def changes_feed_continuous_and_longpoll(ctx):
    db = ctx.fixture_db("feeds", [{"_id": "a"}, {"_id": "b"}])

    # continuous with a timeout: existing changes, then last_seq, then the server closes
    started = time.monotonic()
    feed = db.changes(feed="continuous", timeout=1000)
    seen = [c["id"] for c in feed]
    took = time.monotonic() - started
    assert sorted(seen) == ["a", "b"], seen
    assert feed.last_seq, "the continuous feed must end with last_seq"
    assert took < 10, f"continuous feed with timeout=1000 took {took:.1f}s"

    # longpoll with nothing new: returns empty after the timeout
    started = time.monotonic()
    feed = db.changes(feed="longpoll", since="now", timeout=1000)
    assert list(feed) == []
    took = time.monotonic() - started
    assert 0.5 < took < 10, f"empty longpoll with timeout=1000 took {took:.1f}s"
    assert feed.last_seq
    since = feed.last_seq

    # longpoll woken by a write
    def write(doc_id, delay=0.5):
        def go():
            time.sleep(delay)
            ctx.raw.put_doc(db.database_name, {"_id": doc_id})
        threading.Thread(target=go, daemon=True).start()

    write("c")
    started = time.monotonic()
    feed = db.changes(feed="longpoll", since=since, timeout=20000)
    got = [c["id"] for c in feed]
    took = time.monotonic() - started
    assert got == ["c"], got
    assert took < 10, f"longpoll took {took:.1f}s to see a write"
    assert feed.last_seq

    # continuous, live: a write shows up while the feed is open (since the last seq seen,
    # so the write may land before or after the request without a race)
    since = feed.last_seq
    write("d")
    feed = db.changes(feed="continuous", since=since, timeout=20000)
    first = next(iter(feed))
    assert first["id"] == "d", first
    feed.stop()
    feed._resp.close()

    # continuous with heartbeats: empty lines come through as None
    feed = db.changes(feed="continuous", since="now", heartbeat=200)
    beats = 0
    started = time.monotonic()
    for item in feed:
        assert item is None, item
        beats += 1
        if beats == 2:
            feed.stop()
    feed._resp.close()
    assert beats == 2 and time.monotonic() - started < 10


@check
def infinite_changes(ctx):
    db = ctx.fixture_db("infinite", [{"_id": i} for i in ("a", "b")])
    feed = db.infinite_changes()
    got = []
    threading.Thread(target=lambda: (time.sleep(0.5), ctx.raw.put_doc(db.database_name, {"_id": "c"})),
                     daemon=True).start()
    for change in feed:
        got.append(change["id"])
        if len(got) == 3:
            feed.stop()
    feed._resp.close()
    assert sorted(got) == ["a", "b", "c"], got


# ---------------------------------------------------------------- replication


@check
def replication(ctx):
    src = ctx.fixture_db("repsrc", [{"_id": "r1", "v": 1}, {"_id": "r2", "v": 2}])
    target = CouchDatabase(ctx.client, ctx.name("reptgt"))
    rep = Replicator(ctx.client)
    assert rep.database.database_name == "_replicator"
    doc = rep.create_replication(src, target, create_target=True)
    assert doc["_rev"].startswith("1-"), dict(doc)
    repl_id = doc["_id"]
    assert repl_id in [d["_id"] for d in rep.list_replications()]
    def state():
        try:
            return rep.replication_state(repl_id) in ("completed",) and "completed"
        except Exception:  # noqa: BLE001 - not scheduled yet
            return None

    wait_until(state, timeout=60, step=0.5, what="replication to complete")
    assert target.exists()
    assert sorted(target.keys(remote=True)) == ["r1", "r2"]
    rep.stop_replication(repl_id)
    assert repl_id not in [d["_id"] for d in rep.list_replications()]

    # a one-shot POST /_replicate, credentials passed as the replicator documents do
    auth = {"Authorization": ctx.client.basic_auth_str()}
    target2 = ctx.name("reptgt2")
    r = ctx.client.r_session.post(ctx.url + "/_replicate", json={
        "source": {"url": src.database_url, "headers": auth},
        "target": {"url": ctx.url + "/" + target2, "headers": auth},
        "create_target": True})
    assert r.status_code == 200 and r.json()["ok"] is True, (r.status_code, r.text)
    assert sorted(ctx.client[target2].keys(remote=True)) == ["r1", "r2"]


# ---------------------------------------------------------------- misc database API


@check
def security_revs_and_limits(ctx):
    db = ctx.fixture_db("misc")
    rev = ctx.raw.put_doc(db.database_name, {"_id": "d"})
    sec = db.get_security_document()
    assert isinstance(dict(sec), dict)
    diff = db.revisions_diff("d", rev, "2-deadbeef")
    assert diff == {"d": {"missing": ["2-deadbeef"], "possible_ancestors": [rev]}}, diff
    assert db.missing_revisions("d", rev, "2-deadbeef") == ["2-deadbeef"]
    assert db.missing_revisions("d", rev) == []
    assert db.get_revision_limit() == 1000
    assert db.set_revision_limit(500) == {"ok": True}
    assert db.get_revision_limit() == 500


@check
def session_auto_renew_and_logout(ctx):
    # drop the cookie: the next request gets 401 and auto_renew logs in again
    ctx.client.r_session.cookies.clear()
    dbs = ctx.client.all_dbs()
    assert "_users" in dbs, dbs
    assert ctx.client.session_cookie(), "auto_renew did not log in again"
    ctx.client.disconnect()     # DELETE /_session
    ctx.client.connect()        # and a fresh login
    assert ctx.client.session()["userCtx"]["name"] == ctx.user


def main():
    ctx = Ctx()
    print(f"cloudant {__import__('cloudant').__version__} against {ctx.url} ({ctx.vendor or 'CouchDB'})")
    try:
        status = run_checks("cloudant", CHECKS, ctx, ctx.exchanges)
    finally:
        ctx.raw.drop_dbs(ctx.dbs)
    sys.exit(status)


if __name__ == "__main__":
    main()
