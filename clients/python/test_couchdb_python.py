"""couchdb-python (PyPI `CouchDB`) against a Settee server at SETTEE_URL.

Run by the Rust test `clients`; authenticates with SETTEE_USER / SETTEE_PASSWORD.
"""
import os
import sys

import couchdb


def main():
    server = couchdb.Server(os.environ["SETTEE_URL"])
    server.resource.credentials = (os.environ["SETTEE_USER"], os.environ["SETTEE_PASSWORD"])
    assert server.version(), "welcome answered"
    db = server.create("pyclient")
    assert "pyclient" in server

    doc_id, rev = db.save({"type": "person", "name": "Ann"})
    assert rev.startswith("1-")
    doc = db[doc_id]
    assert doc["name"] == "Ann"
    doc["name"] = "Anne"
    db.save(doc)
    assert db[doc_id]["name"] == "Anne"
    assert db[doc_id].rev.startswith("2-")

    try:
        db.save({"_id": doc_id, "name": "stale"})
        raise AssertionError("a stale write must conflict")
    except couchdb.http.ResourceConflict:
        pass

    results = db.update([{"_id": "b", "v": 1}, {"_id": "c", "v": 2}])
    assert all(ok for ok, _id, _rev in results)
    ids = [row.id for row in db.view("_all_docs")]
    assert ids == sorted([doc_id, "b", "c"]), ids

    db.delete(db["b"])
    assert db.get("b") is None
    assert len(db) == 2

    changes = db.changes()
    assert {c["id"] for c in changes["results"]} == {doc_id, "b", "c"}

    del server["pyclient"]
    assert "pyclient" not in server
    print("couchdb-python: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # report and fail the process
        print(f"FAILED: {exc!r}", file=sys.stderr)
        raise
