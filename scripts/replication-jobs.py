#!/usr/bin/env python3
"""Many continuous replications on one server (the per-user pattern), measured from /proc.

Usage: scripts/replication-jobs.py PORT PID JOBS local|remote [USER:PASSWORD]

Against a Settee listening on 127.0.0.1:PORT whose process is PID: makes JOBS databases of
one document each and a _replicator document per database replicating it continuously into
its own backup database (by local name, or by URL of the same server over HTTP), waits until
/_scheduler/docs shows every job running with its document written, waits 40 s for the
first checkpoints, measures 30 s of idle CPU, then writes into 100 random source databases
and times each write until its backup serves it. Prints RSS, open fds, threads and CPU.
"""
import base64
import http.client
import json
import os
import random
import sys
import time

PORT, PID, N, MODE = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
CREDS = sys.argv[5] if len(sys.argv) > 5 else "admin:admin"
AUTH = "Basic " + base64.b64encode(CREDS.encode()).decode()
conn = http.client.HTTPConnection("127.0.0.1", PORT)


def req(method, path, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Authorization": AUTH, "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else None)


def proc():
    """(CPU seconds, RSS MB, open fds, threads) of the server."""
    fields = open(f"/proc/{PID}/stat").read().split(")")[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = {l.split(":")[0]: l.split()[1] for l in open(f"/proc/{PID}/status")}
    fds = len(os.listdir(f"/proc/{PID}/fd"))
    return cpu, int(status["VmRSS"]) // 1024, fds, int(status["Threads"])


req("PUT", "/_node/_local/_config/replicator/max_jobs", str(2 * N))
for i in range(N):
    req("PUT", f"/user-{i}")
    req("PUT", f"/user-{i}/doc0", {"v": 0})
print("databases made", proc())
started = time.time()
for i in range(N):
    target = f"backup-{i}" if MODE == "local" else f"http://{CREDS}@127.0.0.1:{PORT}/backup-{i}"
    status, _ = req("PUT", f"/_replicator/job-{i}", {
        "source": f"user-{i}", "target": target, "continuous": True, "create_target": True})
    assert status == 201, status
while True:
    _, docs = req("GET", "/_scheduler/docs")
    caught_up = sum(1 for d in docs["docs"]
                    if d["state"] == "running" and (d["info"] or {}).get("docs_written", 0) >= 1)
    if caught_up >= N:
        break
    assert time.time() - started < 600, f"only {caught_up} jobs caught up"
    time.sleep(1)
print("all %d jobs running and caught up after %.1f s" % (N, time.time() - started), proc())
time.sleep(40)
before = proc()
time.sleep(30)
after = proc()
print("idle 30 s: CPU %.1f%% of one core, RSS %d MB, fds %d, threads %d"
      % ((after[0] - before[0]) / 30 * 100, after[1], after[2], after[3]))
lags = []
for k in range(100):
    i = random.randrange(N)
    t0 = time.time()
    req("PUT", f"/user-{i}/w{k}", {"k": k})
    while req("GET", f"/backup-{i}/w{k}")[0] != 200:
        time.sleep(0.002)
    lags.append(time.time() - t0)
lags.sort()
print("write -> backup over 100 random jobs: p50 %.1f ms, p99 %.1f ms, max %.1f ms"
      % (lags[50] * 1000, lags[98] * 1000, lags[-1] * 1000))
