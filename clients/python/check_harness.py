"""Shared plumbing for the client scripts in this folder (not a test itself).

Each script is a list of named checks that all run: a failing check is recorded with its
traceback and the failed HTTP exchanges it made, and the next check still runs. The script
prints a summary and exits 1 if any check failed.

Server URL and admin credentials come from SETTEE_URL, SETTEE_USER and SETTEE_PASSWORD.
Fixtures that a check needs but does not test are written with `Raw` (plain `requests`,
basic auth, uncompressed JSON), so that a broken client call only fails the check that makes
it.
"""
import gzip
import json
import os
import sys
import threading
import time
import traceback
import uuid

import requests

CHECK_TIMEOUT_S = 90


def env():
    return (
        os.environ["SETTEE_URL"].rstrip("/"),
        os.environ["SETTEE_USER"],
        os.environ["SETTEE_PASSWORD"],
    )


def run_id():
    """A fresh suffix for database names, so runs never collide."""
    return uuid.uuid4().hex[:10]


class Exchanges:
    """A `requests` response hook that remembers what each check sent and got back."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        # a failed session login is shown with every later failure: clients log in once
        # and cache the cookie, so the checks after the first do not make that request
        self.failed_login = None

    def reset(self):
        with self.lock:
            self.items = []

    def hook(self, resp, *args, **kwargs):
        req = resp.request
        body = req.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        if body is not None and not isinstance(body, bytes):
            body = b"<streamed body>"
        if body and req.headers.get("Content-Encoding", "").lower() == "gzip":
            try:
                body = b"(gzip-decoded) " + gzip.decompress(body)
            except Exception:  # noqa: BLE001 - shown as is
                pass
        answer = None
        if resp.status_code >= 400:
            try:
                answer = resp.content[:800]
            except Exception:  # noqa: BLE001 - a streamed answer already read
                answer = b"<unreadable>"
        with self.lock:
            if req.method == "POST" and req.url.rstrip("/").endswith("/_session"):
                self.failed_login = None
            self.items.append({
                "method": req.method,
                "url": req.url,
                "headers": {k: v for k, v in req.headers.items()
                            if k.lower() in ("content-type", "content-encoding", "accept", "if-match",
                                             "cookie", "authorization", "last-event-id")},
                "body": body[:800] if body else body,
                "status": resp.status_code,
                "answer": answer,
            })
            if self.items[-1]["status"] >= 400 and req.method == "POST" \
                    and req.url.rstrip("/").endswith("/_session"):
                self.failed_login = self.items[-1]
        return resp

    def failed(self):
        """Failed exchanges, less those that a check expected to fail."""
        with self.lock:
            return [x for x in self.items if x["status"] >= 400 and not x.get("expected")]

    def mark_expected(self, status):
        with self.lock:
            for x in reversed(self.items):
                if x["status"] == status and not x.get("expected"):
                    x["expected"] = True
                    return


CURRENT = None   # the Exchanges of the running script, set by run_checks


def describe(x):
    headers = dict(x["headers"])
    if "Authorization" in headers:
        headers["Authorization"] = headers["Authorization"].split(" ")[0] + " ..."
    if "Cookie" in headers:
        headers["Cookie"] = headers["Cookie"][:24] + ("..." if len(headers["Cookie"]) > 24 else "")
    lines = [f"    > {x['method']} {x['url']}", f"    > headers {headers}"]
    if x["body"]:
        lines.append(f"    > body {x['body']!r}")
    lines.append(f"    < {x['status']} {x['answer']!r}")
    return "\n".join(lines)


class Raw:
    """Plain HTTP with basic auth, for fixtures and clean-up (not the client under test)."""

    def __init__(self, url, user, password):
        self.url = url
        self.s = requests.Session()
        self.s.auth = (user, password)

    def req(self, method, path, expect=None, **kw):
        r = self.s.request(method, self.url + path, timeout=30, **kw)
        if expect is not None:
            assert r.status_code in (expect if isinstance(expect, tuple) else (expect,)), \
                f"fixture {method} {path}: {r.status_code} {r.text}"
        return r

    def vendor(self):
        return self.req("GET", "/", expect=200).json().get("vendor", {}).get("name")

    def put_db(self, name):
        self.req("PUT", f"/{name}", expect=(201, 202))

    def put_doc(self, db, doc):
        r = self.req("PUT", f"/{db}/{doc['_id']}", expect=(201, 202), json=doc)
        return r.json()["rev"]

    def bulk(self, db, docs):
        r = self.req("POST", f"/{db}/_bulk_docs", expect=(201, 202), json={"docs": docs})
        rows = r.json()
        assert all("rev" in row for row in rows), rows
        return {row["id"]: row["rev"] for row in rows}

    def drop_dbs(self, names):
        for name in names:
            try:
                self.req("DELETE", f"/{name}")
            except Exception:  # noqa: BLE001 - best effort
                pass


def expect_http_error(fn, status, error=None, status_of=lambda e: e.response.status_code,
                      body_of=lambda e: e.response.json()):
    """Run fn, which must fail with an HTTP error of `status` (and CouchDB `error` name)."""
    try:
        fn()
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - inspected below
        got = status_of(e)
        assert got == status, f"expected HTTP {status}, got {got}: {e!r}"
        if error is not None:
            body = body_of(e)
            assert body.get("error") == error, f"expected error {error!r}, got {body}"
        if CURRENT is not None:
            CURRENT.mark_expected(status)
        return e
    raise AssertionError(f"expected HTTP {status}, but the call succeeded")


def run_checks(title, checks, ctx, exchanges):
    global CURRENT
    CURRENT = exchanges
    results = []
    for name, fn in checks:
        exchanges.reset()
        outcome = {}

        def target():
            try:
                fn(ctx)
                outcome["ok"] = True
            except BaseException:  # noqa: BLE001 - recorded, the run goes on
                outcome["error"] = traceback.format_exc()

        started = time.monotonic()
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        t.join(CHECK_TIMEOUT_S)
        took = time.monotonic() - started
        if t.is_alive():
            outcome["error"] = f"timed out after {CHECK_TIMEOUT_S}s"
        if outcome.get("ok"):
            print(f"PASS {name} ({took:.1f}s)", flush=True)
            results.append((name, True))
        else:
            print(f"FAIL {name} ({took:.1f}s)", flush=True)
            print("  " + outcome["error"].rstrip().replace("\n", "\n  "), flush=True)
            failed = exchanges.failed()
            if failed:
                print("  failed HTTP exchanges in this check (last 3):")
                for x in failed[-3:]:
                    print(describe(x))
            login = exchanges.failed_login
            if login is not None and login not in failed:
                print("  the client's session login (earlier in this run) failed:")
                print(describe(login))
            results.append((name, False))
    passed = sum(1 for _, ok in results if ok)
    failed = [name for name, ok in results if not ok]
    print()
    print(f"{title}: summary")
    for name, ok in results:
        print(f"  {'pass' if ok else 'FAIL'}  {name}")
    print(f"{title}: {passed} passed, {len(failed)} failed")
    sys.stdout.flush()
    return 1 if failed else 0


class Cases:
    """Independent sub-cases inside one check: each runs, and all failures are reported."""

    def __init__(self):
        self.failures = []

    def eq(self, label, got_fn, want):
        try:
            got = got_fn()
        except Exception as e:  # noqa: BLE001 - collected
            self.failures.append(f"{label}: raised {type(e).__name__}: {e}")
            return
        if got != want:
            self.failures.append(f"{label}: got {got!r}, want {want!r}")

    def run(self, label, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - collected
            self.failures.append(f"{label}: {type(e).__name__}: {e}")

    def done(self):
        assert not self.failures, f"{len(self.failures)} sub-case(s) failed:\n" + "\n".join(self.failures)


def wait_until(pred, timeout=15.0, step=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


def dumps(x):
    return json.dumps(x, sort_keys=True)
