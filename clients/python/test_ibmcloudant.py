"""The IBM Cloudant Python SDK (PyPI `ibmcloudant`) against a server at SETTEE_URL.

Used with its DEFAULT settings, as its documentation shows for CouchDB:
`CloudantV1(authenticator=CouchDbSessionAuthenticator(user, password))` and
`service.set_service_url(url)`. With those defaults the SDK
  * logs in with POST /_session and a JSON body `{"username": ..., "password": ...}`,
    then sends the AuthSession cookie, renewing it from the cookie's expiry;
  * gzips every request body (`Content-Encoding: gzip`);
  * sends view, _all_docs, _find and _changes queries as POST with the options in a
    JSON body.
Admin credentials come from SETTEE_USER / SETTEE_PASSWORD. Every check runs; the script
prints a summary and exits 1 if any failed. Fixtures a check does not test are written with
plain HTTP (check_harness.Raw), so a broken SDK call only fails the check that makes it.
"""
import json
import sys
import threading
import time

from ibm_cloud_sdk_core import ApiException
from ibmcloudant import CouchDbSessionAuthenticator
from ibmcloudant.cloudant_v1 import (
    BulkDocs,
    BulkGetQueryDocument,
    CloudantV1,
    DesignDocument,
    DesignDocumentViewsMapReduce,
    Document,
    IndexDefinition,
    IndexField,
    SecurityObject,
)
from ibmcloudant.features.changes_follower import ChangesFollower
from ibmcloudant.features.pagination import PagerType, Pagination

from check_harness import Cases, Exchanges, Raw, env, expect_http_error, run_checks, run_id

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
        self.service = CloudantV1(authenticator=CouchDbSessionAuthenticator(self.user, self.password))
        self.service.set_service_url(self.url)
        self.service.get_http_client().hooks["response"].insert(0, self.exchanges.hook)

    def name(self, what):
        n = f"ibmcloudant-{self.run}-{what}"
        self.dbs.append(n)
        return n

    def fixture_db(self, what, docs=()):
        name = self.name(what)
        self.raw.put_db(name)
        if docs:
            self.raw.bulk(name, list(docs))
        return name

    @property
    def settee(self):
        return self.vendor == "Settee"


def api_error(fn, status, error=None):
    """fn must raise ApiException with this HTTP status (and CouchDB error name)."""
    e = expect_http_error(fn, status, error, status_of=lambda e: getattr(e, "status_code", None),
                          body_of=lambda e: e.http_response.json())
    assert isinstance(e, ApiException), repr(e)
    return e


def result(resp, status=None):
    if status is not None:
        assert resp.get_status_code() in (status if isinstance(status, tuple) else (status,)), \
            (resp.get_status_code(), resp.get_result())
    return resp.get_result()


# ---------------------------------------------------------------- session and server


@check
def session_login_and_information(ctx):
    info = result(ctx.service.get_session_information(), 200)
    assert info["ok"] is True, info
    assert info["userCtx"]["name"] == ctx.user, info
    assert "_admin" in info["userCtx"]["roles"], info
    assert info["info"]["authenticated"] == "cookie", info
    # the SDK renews its session from the cookie's expiry (Expires or Max-Age)
    cookies = [c for c in ctx.service.get_http_client().cookies if c.name == "AuthSession"]
    assert cookies and cookies[0].value, "no AuthSession cookie after login"
    assert cookies[0].expires is not None, "the AuthSession cookie has neither Expires nor Max-Age"
    tm = ctx.service.authenticator.token_manager
    assert tm.expire_time == cookies[0].expires, (tm.expire_time, cookies[0].expires)


@check
def server_information_uuids_up(ctx):
    info = result(ctx.service.get_server_information(), 200)
    assert info["couchdb"] == "Welcome" and info["version"].startswith("3."), info
    uuids = result(ctx.service.get_uuids(count=3), 200)["uuids"]
    assert len(uuids) == 3 and len(set(uuids)) == 3, uuids
    assert all(len(u) == 32 and int(u, 16) >= 0 for u in uuids), uuids
    assert result(ctx.service.get_up_information(), 200)["status"] == "ok"
    dbs = result(ctx.service.get_all_dbs(), 200)
    assert "_users" in dbs and "_replicator" in dbs, dbs


@check
def database_lifecycle(ctx):
    name = ctx.name("lifecycle")
    assert result(ctx.service.put_database(db=name), 201) == {"ok": True}
    assert ctx.service.head_database(db=name).get_status_code() == 200
    info = result(ctx.service.get_database_information(db=name), 200)
    assert info["db_name"] == name and info["doc_count"] == 0, info
    assert name in result(ctx.service.get_all_dbs(), 200)
    api_error(lambda: ctx.service.put_database(db=name), 412, "file_exists")
    api_error(lambda: ctx.service.put_database(db="Bad_Name"), 400, "illegal_database_name")
    assert result(ctx.service.delete_database(db=name), (200, 202)) == {"ok": True}
    api_error(lambda: ctx.service.head_database(db=name), 404)
    api_error(lambda: ctx.service.delete_database(db=name), 404, "not_found")
    api_error(lambda: ctx.service.get_database_information(db=name), 404, "not_found")


@check
def post_dbs_info(ctx):
    name = ctx.fixture_db("dbsinfo", [{"_id": "a"}])
    missing = name + "-missing"
    rows = result(ctx.service.post_dbs_info(keys=[name, missing]), 200)
    assert [r["key"] for r in rows] == [name, missing], rows
    assert rows[0]["info"]["db_name"] == name and rows[0]["info"]["doc_count"] == 1, rows
    assert rows[1]["error"] == "not_found", rows


# ---------------------------------------------------------------- documents


@check
def post_document(ctx):
    db = ctx.fixture_db("postdoc")
    res = result(ctx.service.post_document(db=db, document=Document(type="person", name="Ann")), 201)
    assert res["ok"] is True and res["id"] and res["rev"].startswith("1-"), res
    stored = ctx.raw.req("GET", f"/{db}/{res['id']}", expect=200).json()
    assert stored["name"] == "Ann" and stored["type"] == "person", stored

    res = result(ctx.service.post_document(db=db, document=Document(_id="bob", name="Bob")), 201)
    assert res["id"] == "bob", res
    e = api_error(lambda: ctx.service.post_document(db=db, document=Document(_id="bob", name="again")),
                  409, "conflict")
    assert e.http_response.json()["reason"] == "Document update conflict."
    # a plain dict works too
    res = result(ctx.service.post_document(db=db, document={"_id": "cid", "n": 1}), 201)
    assert res["id"] == "cid"


@check
def get_document(ctx):
    db = ctx.fixture_db("getdoc")
    rev1 = ctx.raw.put_doc(db, {"_id": "ann", "name": "Ann"})
    rev2 = ctx.raw.put_doc(db, {"_id": "ann", "_rev": rev1, "name": "Anne"})
    doc = result(ctx.service.get_document(db=db, doc_id="ann"), 200)
    assert doc == {"_id": "ann", "_rev": rev2, "name": "Anne"}, doc
    old = result(ctx.service.get_document(db=db, doc_id="ann", rev=rev1), 200)
    assert old["name"] == "Ann" and old["_rev"] == rev1, old
    info = result(ctx.service.get_document(db=db, doc_id="ann", revs_info=True), 200)
    assert [r["rev"] for r in info["_revs_info"]] == [rev2, rev1], info
    revs = result(ctx.service.get_document(db=db, doc_id="ann", revs=True), 200)
    assert revs["_revisions"]["start"] == 2, revs
    e = api_error(lambda: ctx.service.get_document(db=db, doc_id="nobody"), 404, "not_found")
    assert e.http_response.json()["reason"] == "missing"
    ctx.raw.req("DELETE", f"/{db}/ann", params={"rev": rev2}, expect=200)
    e = api_error(lambda: ctx.service.get_document(db=db, doc_id="ann"), 404, "not_found")
    assert e.http_response.json()["reason"] == "deleted"
    api_error(lambda: ctx.service.head_document(db=db, doc_id="nobody"), 404)


@check
def put_document_with_conflicts(ctx):
    db = ctx.fixture_db("putdoc")
    rev1 = ctx.raw.put_doc(db, {"_id": "ann", "name": "Ann"})
    res = result(ctx.service.put_document(db=db, doc_id="ann",
                                          document=Document(_id="ann", _rev=rev1, name="Anne")), 201)
    assert res["ok"] is True and res["rev"].startswith("2-"), res
    assert ctx.raw.req("GET", f"/{db}/ann", expect=200).json()["name"] == "Anne"
    e = api_error(lambda: ctx.service.put_document(db=db, doc_id="ann",
                                                   document=Document(_id="ann", _rev=rev1, name="stale")),
                  409, "conflict")
    assert e.http_response.json()["reason"] == "Document update conflict."
    api_error(lambda: ctx.service.put_document(db=db, doc_id="ann", document=Document(name="no rev")),
              409, "conflict")
    # rev as a query parameter, and a new document with no rev
    res2 = result(ctx.service.put_document(db=db, doc_id="ann", rev=res["rev"],
                                           document=Document(name="Anna")), 201)
    assert res2["rev"].startswith("3-"), res2
    res3 = result(ctx.service.put_document(db=db, doc_id="new", document=Document(v=1)), 201)
    assert res3["id"] == "new" and res3["rev"].startswith("1-"), res3
    assert ctx.service.head_document(db=db, doc_id="new").get_headers()["ETag"] == f'"{res3["rev"]}"'


@check
def delete_document(ctx):
    db = ctx.fixture_db("deldoc")
    rev1 = ctx.raw.put_doc(db, {"_id": "ann", "name": "Ann"})
    rev2 = ctx.raw.put_doc(db, {"_id": "ann", "_rev": rev1, "name": "Anne"})
    api_error(lambda: ctx.service.delete_document(db=db, doc_id="ann", rev=rev1), 409, "conflict")
    res = result(ctx.service.delete_document(db=db, doc_id="ann", rev=rev2), 200)
    assert res["ok"] is True and res["id"] == "ann" and res["rev"].startswith("3-"), res
    r = ctx.raw.req("GET", f"/{db}/ann")
    assert r.status_code == 404 and r.json()["reason"] == "deleted", r.text
    api_error(lambda: ctx.service.delete_document(db=db, doc_id="nobody", rev="1-abc"), 404, "not_found")


@check
def post_bulk_docs(ctx):
    db = ctx.fixture_db("bulk")
    rows = result(ctx.service.post_bulk_docs(db=db, bulk_docs=BulkDocs(docs=[
        Document(_id="a", v=1), Document(_id="b", v=2), Document(v=3)])), 201)
    assert len(rows) == 3 and all(r["ok"] and r["rev"].startswith("1-") for r in rows), rows
    revs = {r["id"]: r["rev"] for r in rows}
    rows2 = result(ctx.service.post_bulk_docs(db=db, bulk_docs=BulkDocs(docs=[
        Document(_id="a", _rev=revs["a"], v=10),
        Document(_id="b", v=20),
        Document(_id=rows[2]["id"], _rev=rows[2]["rev"], _deleted=True),
    ])), 201)
    assert rows2[0]["ok"] and rows2[0]["rev"].startswith("2-"), rows2
    assert rows2[1] == {"id": "b", "error": "conflict", "reason": "Document update conflict."}, rows2
    assert rows2[2]["ok"] and rows2[2]["rev"].startswith("2-"), rows2
    info = ctx.raw.req("GET", f"/{db}", expect=200).json()
    assert info["doc_count"] == 2 and info["doc_del_count"] == 1, info


@check
def post_all_docs(ctx):
    db = ctx.fixture_db("alldocs", [{"_id": i, "n": n} for n, i in enumerate(["c", "a", "e", "b", "d"])])
    res = result(ctx.service.post_all_docs(db=db), 200)
    assert [r["id"] for r in res["rows"]] == ["a", "b", "c", "d", "e"], res
    assert res["total_rows"] == 5, res
    res = result(ctx.service.post_all_docs(db=db, include_docs=True, start_key="b", end_key="d"), 200)
    assert [r["doc"]["_id"] for r in res["rows"]] == ["b", "c", "d"], res
    assert res["rows"][0]["doc"]["n"] == 3, res
    res = result(ctx.service.post_all_docs(db=db, keys=["e", "zz", "a"], include_docs=True), 200)
    assert [r["key"] for r in res["rows"]] == ["e", "zz", "a"], res
    assert res["rows"][1] == {"key": "zz", "error": "not_found"}, res
    assert res["rows"][0]["doc"]["n"] == 2, res
    res = result(ctx.service.post_all_docs(db=db, descending=True, limit=2, skip=1), 200)
    assert [r["id"] for r in res["rows"]] == ["d", "c"], res
    res = result(ctx.service.post_all_docs(db=db, key="c"), 200)
    assert [r["id"] for r in res["rows"]] == ["c"], res
    res = result(ctx.service.post_all_docs(db=db, end_key="c", inclusive_end=False, update_seq=True), 200)
    assert [r["id"] for r in res["rows"]] == ["a", "b"] and "update_seq" in res, res


@check
def post_bulk_get(ctx):
    db = ctx.fixture_db("bulkget", [{"_id": "a", "v": 1}])
    res = result(ctx.service.post_bulk_get(db=db, docs=[BulkGetQueryDocument(id="a"),
                                                        BulkGetQueryDocument(id="zz")]), 200)
    first, second = res["results"]
    assert first["id"] == "a" and first["docs"][0]["ok"]["v"] == 1, first
    assert second["id"] == "zz" and second["docs"][0]["error"]["error"] == "not_found", second


@check
def local_documents(ctx):
    db = ctx.fixture_db("local")
    res = result(ctx.service.put_local_document(db=db, doc_id="cfg", document=Document(v=1)), 201)
    assert res["ok"] is True and res["id"] == "_local/cfg", res
    doc = result(ctx.service.get_local_document(db=db, doc_id="cfg"), 200)
    assert doc["v"] == 1 and doc["_id"] == "_local/cfg", doc
    assert result(ctx.service.post_all_docs(db=db), 200)["rows"] == []
    res = result(ctx.service.delete_local_document(db=db, doc_id="cfg"), 200)
    assert res["ok"] is True, res
    api_error(lambda: ctx.service.get_local_document(db=db, doc_id="cfg"), 404, "not_found")


# ---------------------------------------------------------------- design documents and views

VIEW_DOCS = [
    {"_id": "a1", "type": "a", "n": 1},
    {"_id": "a2", "type": "a", "n": 2},
    {"_id": "b1", "type": "b", "n": 10},
    {"_id": "c1", "type": "c", "n": 100},
    {"_id": "c2", "type": "c", "n": 200},
    {"_id": "x", "other": True},
]
MAP_BY_TYPE = "function (doc) { if (doc.type) { emit(doc.type, doc.n); } }"


@check
def put_design_document(ctx):
    db = ctx.fixture_db("ddoc", VIEW_DOCS)
    ddoc = DesignDocument(views={
        "by_type": DesignDocumentViewsMapReduce(map=MAP_BY_TYPE, reduce="_sum"),
        "js_sum": DesignDocumentViewsMapReduce(
            map=MAP_BY_TYPE, reduce="function (keys, values, rereduce) { return sum(values); }"),
    })
    res = result(ctx.service.put_design_document(db=db, ddoc="stats", design_document=ddoc), 201)
    assert res["ok"] is True and res["id"] == "_design/stats" and res["rev"].startswith("1-"), res
    back = result(ctx.service.get_design_document(db=db, ddoc="stats"), 200)
    assert back["views"]["by_type"] == {"map": MAP_BY_TYPE, "reduce": "_sum"}, back
    info = result(ctx.service.get_design_document_information(db=db, ddoc="stats"), 200)
    assert info["name"] == "stats" and "view_index" in info, info
    # the view it defines answers (plain GET, so this check tests only put_design_document)
    r = ctx.raw.req("GET", f"/{db}/_design/stats/_view/js_sum", params={"group": "true"}, expect=200)
    assert r.json()["rows"] == [{"key": "a", "value": 3}, {"key": "b", "value": 10},
                                {"key": "c", "value": 300}], r.json()
    api_error(lambda: ctx.service.put_design_document(db=db, ddoc="stats", design_document=ddoc),
              409, "conflict")
    res2 = result(ctx.service.put_design_document(db=db, ddoc="stats", design_document=ddoc,
                                                  rev=res["rev"]), 201)
    assert res2["rev"].startswith("2-"), res2
    assert result(ctx.service.delete_design_document(db=db, ddoc="stats", rev=res2["rev"]), 200)["ok"]


@check
def post_view_with_options(ctx):
    db = ctx.fixture_db("views", VIEW_DOCS)
    ctx.raw.put_doc(db, {"_id": "_design/stats",
                         "views": {"by_type": {"map": MAP_BY_TYPE, "reduce": "_sum"}}})

    def rows(**kw):
        return result(ctx.service.post_view(db=db, ddoc="stats", view="by_type", **kw), 200)["rows"]

    cases = Cases()
    case = cases.eq

    case("default (reduce)", lambda: rows(), [{"key": None, "value": 313}])
    case("group=True", lambda: rows(group=True),
         [{"key": "a", "value": 3}, {"key": "b", "value": 10}, {"key": "c", "value": 300}])
    case("reduce=False", lambda: [(r["key"], r["id"], r["value"]) for r in rows(reduce=False)],
         [("a", "a1", 1), ("a", "a2", 2), ("b", "b1", 10), ("c", "c1", 100), ("c", "c2", 200)])
    case("start_key/end_key reduce=False",
         lambda: [r["id"] for r in rows(start_key="b", end_key="c", reduce=False)], ["b1", "c1", "c2"])
    case("start_key/end_key group=True", lambda: rows(start_key="b", end_key="c", group=True),
         [{"key": "b", "value": 10}, {"key": "c", "value": 300}])
    case("keys reduce=False", lambda: [r["id"] for r in rows(keys=["c", "a"], reduce=False)],
         ["c1", "c2", "a1", "a2"])
    case("keys group=True", lambda: rows(keys=["c", "a", "zz"], group=True),
         [{"key": "c", "value": 300}, {"key": "a", "value": 3}])
    case("key include_docs", lambda: [r["doc"]["n"] for r in rows(key="b", reduce=False, include_docs=True)],
         [10])
    case("descending limit", lambda: [r["id"] for r in rows(reduce=False, descending=True, limit=2)],
         ["c2", "c1"])
    case("skip limit", lambda: [r["id"] for r in rows(reduce=False, skip=1, limit=2)], ["a2", "b1"])
    case("start_key_doc_id", lambda: [r["id"] for r in rows(reduce=False, start_key="a",
                                                             start_key_doc_id="a2", limit=2)], ["a2", "b1"])
    case("inclusive_end=False", lambda: [r["id"] for r in rows(reduce=False, end_key="b", inclusive_end=False)],
         ["a1", "a2"])
    # CouchDB 3.5 reduces a single-key `keys` fetch without group; two keys need group=true
    case("keys (one) reduce", lambda: rows(keys=["c"]), [{"key": None, "value": 300}])
    cases.run("keys (two) without group: 400", lambda: api_error(
        lambda: ctx.service.post_view(db=db, ddoc="stats", view="by_type", keys=["c", "a"]),
        400, "query_parse_error"))
    cases.run("missing view: 404", lambda: api_error(
        lambda: ctx.service.post_view(db=db, ddoc="stats", view="nope"), 404, "not_found"))
    cases.done()


# ---------------------------------------------------------------- Mango

PEOPLE = [
    {"_id": "p1", "type": "person", "name": "Ann", "age": 30},
    {"_id": "p2", "type": "person", "name": "Bob", "age": 25},
    {"_id": "p3", "type": "person", "name": "Cid", "age": 40},
    {"_id": "t1", "type": "thing", "name": "Box"},
]


@check
def post_find_without_index(ctx):
    db = ctx.fixture_db("find", PEOPLE)
    res = result(ctx.service.post_find(db=db, selector={"type": "person", "age": {"$gt": 26}},
                                       fields=["_id", "name"]), 200)
    assert sorted(d["_id"] for d in res["docs"]) == ["p1", "p3"], res
    assert all(set(d) == {"_id", "name"} for d in res["docs"]), res
    assert "warning" in res and isinstance(res["bookmark"], str), res
    res = result(ctx.service.post_find(db=db, selector={"_id": {"$gt": None}, "type": "person"},
                                       fields=["_id"], sort=[{"_id": "desc"}], limit=2), 200)
    assert [d["_id"] for d in res["docs"]] == ["p3", "p2"], res
    nxt = result(ctx.service.post_find(db=db, selector={"_id": {"$gt": None}, "type": "person"},
                                       fields=["_id"], sort=[{"_id": "desc"}], limit=2,
                                       bookmark=res["bookmark"]), 200)
    assert [d["_id"] for d in nxt["docs"]] == ["p1"], nxt
    res = result(ctx.service.post_find(db=db, selector={"type": "person"}, execution_stats=True), 200)
    assert len(res["docs"]) == 3 and res["execution_stats"]["results_returned"] == 3, res
    api_error(lambda: ctx.service.post_find(db=db, selector={"type": "person"}, sort=[{"age": "asc"}]),
              400, "no_usable_index")


@check
def post_index(ctx):
    db = ctx.fixture_db("index", PEOPLE)
    res = result(ctx.service.get_indexes_information(db=db), 200)
    assert res["total_rows"] == 1 and res["indexes"][0]["name"] == "_all_docs", res
    index = IndexDefinition(fields=[IndexField(age="asc")])
    res = result(ctx.service.post_index(db=db, index=index, ddoc="idx", name="by-age", type="json"), 200)
    assert res["result"] == "created" and res["name"] == "by-age", res
    names = [i["name"] for i in result(ctx.service.get_indexes_information(db=db), 200)["indexes"]]
    assert names == ["_all_docs", "by-age"], names
    found = result(ctx.service.post_find(db=db, selector={"age": {"$gt": 0}}, fields=["_id"],
                                         sort=[{"age": "asc"}], use_index=["idx"]), 200)
    assert [d["_id"] for d in found["docs"]] == ["p2", "p1", "p3"], found
    assert result(ctx.service.delete_index(db=db, ddoc="idx", type="json", index="by-age"), 200)["ok"]


# ---------------------------------------------------------------- attachments


@check
def attachments(ctx):
    db = ctx.fixture_db("atts")
    rev1 = ctx.raw.put_doc(db, {"_id": "doc", "v": 1})
    res = result(ctx.service.put_attachment(db=db, doc_id="doc", attachment_name="hello.txt",
                                            attachment=b"Hello, world", content_type="text/plain",
                                            rev=rev1), 201)
    assert res["ok"] is True and res["rev"].startswith("2-"), res
    rev2 = res["rev"]
    got = ctx.service.get_attachment(db=db, doc_id="doc", attachment_name="hello.txt")
    assert got.get_status_code() == 200
    assert got.get_result().content == b"Hello, world", got.get_result().content
    assert got.get_headers()["Content-Type"].startswith("text/plain"), got.get_headers()
    # the SDK sent the bytes gzipped (Content-Encoding: gzip): CouchDB keeps them gzip-encoded
    # and decodes them for a reader that does not accept gzip
    plain = ctx.raw.req("GET", f"/{db}/doc/hello.txt", headers={"Accept-Encoding": "identity"}, expect=200)
    assert plain.content == b"Hello, world", plain.content
    doc = ctx.raw.req("GET", f"/{db}/doc", expect=200).json()
    stub = doc["_attachments"]["hello.txt"]
    assert stub["content_type"] == "text/plain" and stub["stub"] is True, stub

    api_error(lambda: ctx.service.put_attachment(db=db, doc_id="doc", attachment_name="x.txt",
                                                 attachment=b"x", content_type="text/plain", rev=rev1),
              409, "conflict")
    blob = bytes(range(256)) * 4
    res = result(ctx.service.put_attachment(db=db, doc_id="doc", attachment_name="blob.bin", attachment=blob,
                                            content_type="application/octet-stream", rev=rev2), 201)
    rev3 = res["rev"]
    got = ctx.service.get_attachment(db=db, doc_id="doc", attachment_name="blob.bin")
    assert got.get_result().content == blob
    assert ctx.service.head_attachment(db=db, doc_id="doc", attachment_name="blob.bin").get_status_code() == 200

    res = result(ctx.service.delete_attachment(db=db, doc_id="doc", attachment_name="hello.txt", rev=rev3), 200)
    assert res["ok"] is True and res["rev"].startswith("4-"), res
    api_error(lambda: ctx.service.get_attachment(db=db, doc_id="doc", attachment_name="hello.txt"),
              404, "not_found")
    doc = ctx.raw.req("GET", f"/{db}/doc", expect=200).json()
    assert sorted(doc["_attachments"]) == ["blob.bin"] and doc["v"] == 1, doc


# ---------------------------------------------------------------- changes


def write_later(ctx, db, doc_id, delay=0.5):
    def go():
        time.sleep(delay)
        ctx.raw.put_doc(db, {"_id": doc_id})
    threading.Thread(target=go, daemon=True).start()


@check
def post_changes_normal(ctx):
    db = ctx.fixture_db("changes", [{"_id": i, "type": t} for i, t in (("a", "x"), ("b", "y"), ("c", "x"))])
    res = result(ctx.service.post_changes(db=db), 200)
    assert sorted(r["id"] for r in res["results"]) == ["a", "b", "c"], res
    assert res["last_seq"] and res["pending"] == 0, res
    last = res["last_seq"]
    assert result(ctx.service.post_changes(db=db, since=last), 200)["results"] == []
    res = result(ctx.service.post_changes(db=db, include_docs=True), 200)
    assert {r["doc"]["_id"] for r in res["results"]} == {"a", "b", "c"}, res
    res = result(ctx.service.post_changes(db=db, limit=1), 200)
    assert len(res["results"]) == 1 and res["pending"] == 2, res
    res = result(ctx.service.post_changes(db=db, filter="_doc_ids", doc_ids=["b"]), 200)
    assert [r["id"] for r in res["results"]] == ["b"], res
    res = result(ctx.service.post_changes(db=db, filter="_selector", selector={"type": "x"}), 200)
    assert sorted(r["id"] for r in res["results"]) == ["a", "c"], res


@check
def post_changes_longpoll(ctx):
    db = ctx.fixture_db("longpoll", [{"_id": "a"}])
    started = time.monotonic()
    res = result(ctx.service.post_changes(db=db, feed="longpoll", since="now", timeout=1000), 200)
    took = time.monotonic() - started
    assert res["results"] == [] and res["last_seq"], res
    assert 0.5 < took < 10, f"empty longpoll with timeout=1000 took {took:.1f}s"
    write_later(ctx, db, "b")
    started = time.monotonic()
    res = result(ctx.service.post_changes(db=db, feed="longpoll", since=res["last_seq"], timeout=20000), 200)
    took = time.monotonic() - started
    assert [r["id"] for r in res["results"]] == ["b"], res
    assert took < 10, f"longpoll took {took:.1f}s to see a write"


@check
def post_changes_continuous_stream(ctx):
    db = ctx.fixture_db("continuous", [{"_id": "a"}, {"_id": "b"}])
    started = time.monotonic()
    resp = ctx.service.post_changes_as_stream(db=db, feed="continuous", timeout=1000).get_result()
    lines = [json.loads(line) for line in resp.iter_lines() if line]
    took = time.monotonic() - started
    assert sorted(x["id"] for x in lines[:-1]) == ["a", "b"], lines
    assert "last_seq" in lines[-1], lines
    assert took < 10, f"continuous feed with timeout=1000 took {took:.1f}s"


@check
def changes_follower_one_off(ctx):
    db = ctx.fixture_db("follower", [{"_id": i} for i in ("a", "b", "c")])
    follower = ChangesFollower(service=ctx.service, db=db)
    seen = [item.id for item in follower.start_one_off()]
    assert sorted(seen) == ["a", "b", "c"], seen


# ---------------------------------------------------------------- misc


@check
def revs_diff_and_security(ctx):
    db = ctx.fixture_db("misc")
    rev = ctx.raw.put_doc(db, {"_id": "d"})
    diff = result(ctx.service.post_revs_diff(db=db, document_revisions={"d": [rev, "2-deadbeef"]}), 200)
    assert diff == {"d": {"missing": ["2-deadbeef"], "possible_ancestors": [rev]}}, diff
    sec = result(ctx.service.get_security(db=db), 200)
    assert isinstance(sec, dict), sec
    res = result(ctx.service.put_security(db=db, members=SecurityObject(names=["bob"], roles=[]),
                                          admins=SecurityObject(names=[], roles=["boss"])), 200)
    assert res == {"ok": True}, res
    sec = result(ctx.service.get_security(db=db), 200)
    assert sec["members"]["names"] == ["bob"] and sec["admins"]["roles"] == ["boss"], sec


@check
def pagination(ctx):
    db = ctx.fixture_db("pages", [{"_id": f"d{i}", "type": "t", "n": i} for i in range(7)])
    ctx.raw.put_doc(db, {"_id": "_design/v", "views": {"by_n": {"map": "function (doc) { emit(doc.n, null); }"}}})
    ids = [row.id for row in Pagination.new_pagination(ctx.service, PagerType.POST_ALL_DOCS, db=db,
                                                       limit=3).rows()]
    assert ids == ["_design/v"] + [f"d{i}" for i in range(7)], ids
    keys = [row.key for row in Pagination.new_pagination(ctx.service, PagerType.POST_VIEW, db=db, ddoc="v",
                                                         view="by_n", limit=3).rows()]
    assert keys == list(range(7)), keys
    found = [doc._id for doc in Pagination.new_pagination(ctx.service, PagerType.POST_FIND, db=db,
                                                          selector={"type": "t"}, limit=3).rows()]
    assert sorted(found) == [f"d{i}" for i in range(7)], found


def main():
    ctx = Ctx()
    version = __import__("ibmcloudant.version", fromlist=["__version__"]).__version__
    print(f"ibmcloudant {version} against {ctx.url} ({ctx.vendor or 'CouchDB'})")
    try:
        status = run_checks("ibmcloudant", CHECKS, ctx, ctx.exchanges)
    finally:
        ctx.raw.drop_dbs(ctx.dbs)
    sys.exit(status)


if __name__ == "__main__":
    main()
