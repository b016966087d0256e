#!/usr/bin/env python3
"""Document-API workloads against any CouchDB-compatible server, with answers verified.

A stopgap until `settee bench` exists. Usage:

    scripts/bench-http.py URL [--user U --password P] [--docs 100000] [--seconds 5]

Reports JSON lines: GET by 120 keep-alive clients (wrk), _bulk_docs insert rate, _all_docs
and _changes rows/s, durable single-document PUTs (1 and 64 writers), and the read rate of
15 clients alone and while a writer bulk-loads.
"""
import argparse
import base64
import json
import subprocess
import threading
import time

from benchclient import Client


def wrk_get(url, path, auth, seconds):
    header = []
    if auth:
        header = ["-H", "Authorization: Basic " + base64.b64encode(auth.encode()).decode()]
    out = subprocess.run(["wrk", "-t2", "-c120", f"-d{seconds}s", "--latency", *header, url + path], capture_output=True, text=True).stdout
    rps = float(next(l for l in out.splitlines() if l.startswith("Requests/sec")).split()[1])
    errors = sum(int(x) for l in out.splitlines() if "Non-2xx" in l or "Socket errors" in l for x in l.replace(",", " ").split() if x.isdigit())
    p99 = next((l.split()[1] for l in out.splitlines() if l.strip().startswith("99%")), "?")
    return rps, errors, p99


def timed_writers(url, auth, db, writers, seconds):
    counts = [0] * writers
    stop = time.time() + seconds

    def run(w):
        c = Client(url, auth)
        i = 0
        while time.time() < stop:
            status, _ = c.request("PUT", f"/{db}/w{writers}-{w}-{i}", {"w": w, "i": i})
            assert status == 201, status
            i += 1
        counts[w] = i

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return sum(counts) / seconds


def readers(url, auth, db, clients, seconds, during=None):
    counts = [0] * clients
    stop = time.time() + seconds

    def run(k):
        c = Client(url, auth)
        while time.time() < stop:
            status, body = c.request("GET", f"/{db}/cat")
            assert status == 200 and b"gizmo" in body
            counts[k] += 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    if during:
        threading.Thread(target=during, daemon=True).start()
    [t.start() for t in threads]
    [t.join() for t in threads]
    return sum(counts) / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    auth = f"{a.user}:{a.password}" if a.user else None
    c = Client(a.url, auth)
    db = f"bench-{int(time.time())}"
    assert c.request("PUT", f"/{db}")[0] in (201, 202)
    assert c.request("PUT", f"/{db}/cat", {"name": "gizmo"})[0] == 201
    report = {"url": a.url}

    rps, errors, p99 = wrk_get(a.url, f"/{db}/cat", auth, a.seconds)
    report["get_rps"], report["get_errors"], report["get_p99"] = round(rps), errors, p99

    start = time.time()
    for b in range(a.docs // 1000):
        docs = [{"_id": f"d{b:04d}-{i:03d}", "n": b * 1000 + i, "name": "x"} for i in range(1000)]
        status, body = c.request("POST", f"/{db}/_bulk_docs", {"docs": docs})
        assert status == 201 and all(r.get("ok") for r in json.loads(body))
    report["bulk_docs_per_s"] = round(a.docs / (time.time() - start))

    start = time.time()
    status, body = c.request("GET", f"/{db}/_all_docs")
    took = time.time() - start
    rows = json.loads(body)["rows"]
    assert status == 200 and len(rows) == a.docs + 1 and rows[1]["id"] == "d0000-000"
    report["all_docs_rows_per_s"] = round(len(rows) / took)

    start = time.time()
    status, body = c.request("GET", f"/{db}/_changes")
    took = time.time() - start
    results = json.loads(body)["results"]
    assert status == 200 and len(results) == a.docs + 1
    report["changes_rows_per_s"] = round(len(results) / took)

    report["durable_put_1_writer"] = round(timed_writers(a.url, auth, db, 1, a.seconds))
    report["durable_put_64_writers"] = round(timed_writers(a.url, auth, db, 64, a.seconds))

    alone = readers(a.url, auth, db, 15, a.seconds)

    def load():
        w = Client(a.url, auth)
        for b in range(10_000):
            docs = [{"_id": f"load{b:05d}-{i:03d}", "n": i} for i in range(1000)]
            if w.request("POST", f"/{db}/_bulk_docs", {"docs": docs})[0] != 201:
                return

    during = readers(a.url, auth, db, 15, a.seconds, during=load)
    report["reads_15_alone"], report["reads_15_during_load"] = round(alone), round(during)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
