"""A Prometheus scrape of a server at SETTEE_URL, parsed by prometheus-client's text-format
parser (the Python reference implementation of the format), as a Prometheus server reads it.

Checks that every family parses with a type, that CouchDB's names and labels are there, that
the counters it moved are counted, and that summaries carry their quantiles, sum and count.
Exits 1 with the failures listed if any check fails.
"""
import base64
import os
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(path):
    auth = base64.b64encode(
        f"{os.environ['SETTEE_USER']}:{os.environ['SETTEE_PASSWORD']}".encode()
    ).decode()
    req = urllib.request.Request(os.environ["SETTEE_URL"] + path)
    req.add_header("Authorization", "Basic " + auth)
    with urllib.request.urlopen(req) as resp:
        return resp.headers.get("Content-Type"), resp.read().decode()


failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


# Traffic the scrape must show: a database, two documents, one missing document.
for path in ["/", "/_all_dbs"]:
    get(path)
content_type, text = get("/_node/_local/_prometheus")
check(content_type.startswith("text/plain"), f"content type {content_type}")
families = {f.name: f for f in text_string_to_metric_families(text)}
check(len(families) > 150, f"only {len(families)} families")

# The parser strips `_total` from counter family names.
expected_types = {
    "couchdb_httpd_request_methods": "counter",
    "couchdb_httpd_status_codes": "counter",
    "couchdb_document_writes": "counter",
    "couchdb_open_databases": "gauge",
    "couchdb_open_os_files": "gauge",
    "couchdb_request_time_seconds": "summary",
    "couchdb_fsync_time_seconds": "summary",
    "couchdb_couch_log_requests": "counter",
    "couchdb_auth_cache_requests": "counter",
    "couchdb_uptime_seconds": "counter",
    "couchdb_membership": "gauge",
}
for name, kind in expected_types.items():
    family = families.get(name)
    check(family is not None, f"no family {name}")
    if family is not None:
        check(family.type == kind, f"{name} is a {family.type}, not a {kind}")

samples = {}
for family in families.values():
    for s in family.samples:
        samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

get_requests = samples.get(("couchdb_httpd_request_methods_total", (("method", "GET"),)), 0)
check(get_requests >= 3, f"GET requests counted: {get_requests}")
ok_responses = samples.get(("couchdb_httpd_status_codes_total", (("code", "200"),)), 0)
check(ok_responses >= 2, f"200 responses counted: {ok_responses}")
quantiles = [q for (n, labels) in samples if n == "couchdb_request_time_seconds" for q in labels]
check(
    sorted({v for (_, v) in quantiles}) == ["0.5", "0.75", "0.9", "0.95", "0.99", "0.999"],
    f"request_time quantiles {quantiles}",
)
count = samples.get(("couchdb_request_time_seconds_count", ()), 0)
check(count >= 1, f"request_time count {count}")
total = samples.get(("couchdb_request_time_seconds_sum", ()), -1)
check(0 <= total < count * 10, f"request_time sum {total} s for {count} requests")
check(samples.get(("couchdb_uptime_seconds_total", ()), -1) >= 0, "uptime")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"ok: {len(families)} families parsed")
