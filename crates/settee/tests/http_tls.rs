//! HTTPS with `[ssl]`: a self-signed certificate generated here, the server restarted with
//! TLS on a second port, and a client (Python's `ssl`, which verifies the certificate against
//! the one trusted here) reading and writing over it.

mod common;

use std::process::Command;

use common::TestServer;
use serde_json::json;

const CLIENT: &str = r#"
import base64, json, ssl, sys, urllib.request
url, cafile = sys.argv[1], sys.argv[2]
auth = "Basic " + base64.b64encode(b"admin:secret").decode()
ctx = ssl.create_default_context(cafile=cafile if cafile != "-" else None)
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=body, headers={"Authorization": auth, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
out = {}
try:
    out["welcome"] = call("GET", "/")
    out["put"] = call("PUT", "/tlsdb/doc", b'{"over":"tls"}')
    out["get"] = call("GET", "/tlsdb/doc")
    login = urllib.request.Request(url + "/_session", method="POST", data=b'{"name":"admin","password":"secret"}', headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(login, context=ctx) as r:
        out["cookie"] = r.headers.get("Set-Cookie")
except Exception as e:
    out["error"] = type(e).__name__ + ": " + str(e)
print(json.dumps(out))
"#;

fn python(url: &str, cafile: &str) -> serde_json::Value {
    let out = Command::new("python3")
        .args(["-c", CLIENT, url, cafile])
        .output()
        .expect("python3 runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "client output: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn https_with_a_self_signed_certificate() {
    let mut s = TestServer::start();
    let admin = s.admin();
    assert_eq!(admin.put("/tlsdb", "").status, 201);
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert_file, key_file) = (s.dir.path().join("cert.pem"), s.dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.key_pair.serialize_pem()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (key, value) in [
        ("enable", "true".to_string()),
        ("port", port.to_string()),
        ("cert_file", cert_file.display().to_string()),
        ("key_file", key_file.display().to_string()),
    ] {
        assert_eq!(
            admin
                .put(
                    &format!("/_node/_local/_config/ssl/{key}"),
                    &json!(value).to_string()
                )
                .status,
            200
        );
    }
    s.restart();

    let https = format!("https://localhost:{port}");
    let out = python(&https, &cert_file.display().to_string());
    assert_eq!(out["welcome"][0], 200, "{out}");
    assert_eq!(out["welcome"][1]["couchdb"], "Welcome");
    assert_eq!(out["put"][0], 201, "{out}");
    assert_eq!(out["get"][1]["over"], "tls", "{out}");
    assert_eq!(
        s.admin().get("/tlsdb/doc").json()["over"],
        "tls",
        "the same databases over plain HTTP"
    );
    assert!(
        out["cookie"]
            .as_str()
            .is_some_and(|c| c.starts_with("AuthSession=") && c.contains("; Secure")),
        "session cookies over TLS are Secure: {out}"
    );
    let plain_login = s
        .anon()
        .post("/_session", r#"{"name":"admin","password":"secret"}"#);
    assert!(
        !plain_login.header("set-cookie").unwrap().contains("Secure"),
        "but not over plain HTTP"
    );

    let untrusted = python(&https, "-");
    assert!(
        untrusted["error"]
            .as_str()
            .is_some_and(|e| e.contains("CERTIFICATE_VERIFY_FAILED")),
        "a client that does not trust the certificate refuses it: {untrusted}"
    );
    let plain = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
        use std::io::{Read, Write};
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        Ok(buf)
    });
    assert!(
        !String::from_utf8_lossy(&plain.unwrap_or_default()).contains("Welcome"),
        "plain HTTP on the TLS port gets no answer"
    );
}
