-- POSTs one small new document per request (the server generates ids); durable writes.
wrk.method = "POST"
wrk.body = '{"name":"gizmo","n":1}'
wrk.headers["Content-Type"] = "application/json"
