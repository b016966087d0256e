#!/usr/bin/env python3
"""View indexing workloads against any CouchDB-compatible server, with answers verified.

A stopgap until `settee bench` exists. Usage:

    scripts/bench-views.py URL [--user U --password P] [--docs 100000] [--large-docs 20000]
                               [--words 200000] [--python LANGUAGE]

Reports JSON lines: docs indexed per second for the first `?group=true` query of the
published "scoresByMonth" view, with a JavaScript `sum(values)` reduce and with `_sum`; the
same with large documents (up to 100 extra ~800-byte fields); and the time of a
`group=true` `_count` query over a built view of `--words` rows. Every answer is checked
against sums computed here. With `--python LANGUAGE`, the same view written in Python is
also indexed, in a design document of that language (the server must have a query server,
such as couchpy, configured for it).
"""
import argparse
import json
import random
import string
import time

from benchclient import Client

MAP = ("function(doc){ if (doc.metadata && doc.metadata.createdAt) { var p = doc.metadata.createdAt.split(\"-\");"
       " emit([p[0], p[1]], doc.score); } }")

PYTHON_MAP = """def fun(doc):
    m = doc.get('metadata')
    if m and m.get('createdAt'):
        p = m['createdAt'].split('-')
        yield [p[0], p[1]], doc['score']"""


def score_docs(n, rng, extra_fields=0):
    for i in range(n):
        doc = {
            "_id": f"d{i:08d}",
            "metadata": {"docType": "score", "createdAt": f"{rng.randint(2010, 2019)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"},
            "username": "".join(rng.choice(string.ascii_lowercase) for _ in range(6)),
            "score": rng.randint(0, 5000),
        }
        for f in range(rng.randint(0, extra_fields) if extra_fields else 0):
            doc[f"field{f}"] = "".join(rng.choice(string.ascii_letters) for _ in range(800))
        yield doc


def load(c, db, docs):
    c.request("DELETE", f"/{db}")
    c.ok("PUT", f"/{db}")
    expected = {}
    batch = []
    for d in docs:
        y, m, _ = d["metadata"]["createdAt"].split("-")
        expected[(y, m)] = expected.get((y, m), 0) + d["score"]
        batch.append(d)
        if len(batch) == 1000:
            c.ok("POST", f"/{db}/_bulk_docs", {"docs": batch})
            batch = []
    if batch:
        c.ok("POST", f"/{db}/_bulk_docs", {"docs": batch})
    return expected


def time_group_query(c, db, ddoc, reduce, expected, n, language=None):
    body = {"views": {"scoresByMonth": {"map": PYTHON_MAP if language else MAP, "reduce": reduce}}}
    if language:
        body["language"] = language
    c.ok("PUT", f"/{db}/_design/{ddoc}", body)
    started = time.time()
    rows = c.ok("GET", f"/{db}/_design/{ddoc}/_view/scoresByMonth?group=true")["rows"]
    elapsed = time.time() - started
    got = {tuple(r["key"]): r["value"] for r in rows}
    if got != {k: v for k, v in expected.items()}:
        raise SystemExit(f"{ddoc}: wrong answer ({len(got)} groups, expected {len(expected)})")
    return {"docs": n, "seconds": round(elapsed, 3), "docs_per_s": round(n / elapsed)}


def words(c, db, n, rng):
    vocab = [f"w{i}" for i in range(5000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    c.request("DELETE", f"/{db}")
    c.ok("PUT", f"/{db}")
    expected = {}
    chosen = rng.choices(vocab, weights, k=n)
    for start in range(0, n, 1000):
        batch = [{"_id": f"w{start + i:08d}", "word": w} for i, w in enumerate(chosen[start:start + 1000])]
        for d in batch:
            expected[d["word"]] = expected.get(d["word"], 0) + 1
        c.ok("POST", f"/{db}/_bulk_docs", {"docs": batch})
    c.ok("PUT", f"/{db}/_design/w", {"views": {"count": {"map": "function(doc){ emit(doc.word, 1); }", "reduce": "_count"}}})
    started = time.time()
    c.ok("GET", f"/{db}/_design/w/_view/count?limit=1")
    build = time.time() - started
    timings = []
    for _ in range(5):
        started = time.time()
        rows = c.ok("GET", f"/{db}/_design/w/_view/count?group=true")["rows"]
        timings.append(time.time() - started)
        if {r["key"]: r["value"] for r in rows} != expected:
            raise SystemExit("word count: wrong answer")
    return {"rows": n, "build_s": round(build, 3), "group_query_ms_best": round(min(timings) * 1000, 1), "group_query_ms_median": round(sorted(timings)[2] * 1000, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--docs", type=int, default=100000)
    ap.add_argument("--large-docs", type=int, default=20000)
    ap.add_argument("--words", type=int, default=200000)
    ap.add_argument("--python", metavar="LANGUAGE", help="also index the view written in Python, in a design document of this language")
    args = ap.parse_args()
    auth = f"{args.user}:{args.password}" if args.user else None
    c = Client(args.url, auth, timeout=3600)
    rng = random.Random(7)
    expected = load(c, "bench_scores", score_docs(args.docs, rng))
    print(json.dumps({"workload": "index_js_reduce", **time_group_query(c, "bench_scores", "js", "function(keys, values, rereduce) { return sum(values); }", expected, args.docs)}), flush=True)
    print(json.dumps({"workload": "index_builtin_sum", **time_group_query(c, "bench_scores", "native", "_sum", expected, args.docs)}), flush=True)
    if args.python:
        print(json.dumps({"workload": "index_python_builtin_sum", **time_group_query(c, "bench_scores", "py", "_sum", expected, args.docs, args.python)}), flush=True)
    if args.large_docs:
        expected = load(c, "bench_large", score_docs(args.large_docs, rng, extra_fields=100))
        print(json.dumps({"workload": "index_large_js_reduce", **time_group_query(c, "bench_large", "js", "function(keys, values, rereduce) { return sum(values); }", expected, args.large_docs)}), flush=True)
        print(json.dumps({"workload": "index_large_builtin_sum", **time_group_query(c, "bench_large", "native", "_sum", expected, args.large_docs)}), flush=True)
        c.request("DELETE", "/bench_large")
    if args.words:
        print(json.dumps({"workload": "word_count_group", **words(c, "bench_words", args.words, rng)}), flush=True)
        c.request("DELETE", "/bench_words")
    c.request("DELETE", "/bench_scores")


if __name__ == "__main__":
    main()
