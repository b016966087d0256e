"""The small keep-alive HTTP client the benchmark scripts share."""
import base64
import http.client
import json
import urllib.parse


class Client:
    def __init__(self, url, auth, timeout=120):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.headers = {"Content-Type": "application/json"}
        if auth:
            self.headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.conn.request(method, path, body=data, headers=self.headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read()

    def ok(self, method, path, body=None):
        status, data = self.request(method, path, body)
        if status >= 300:
            raise SystemExit(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data)
