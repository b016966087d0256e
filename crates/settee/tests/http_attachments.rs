//! Attachments over HTTP: inline and standalone, stubs, streaming, ranges, gzip.

mod common;

use common::TestServer;
use serde_json::{json, Value};

fn b64(bytes: &[u8]) -> String {
    common::base64_bytes(bytes)
}

#[test]
fn inline_attachments_stubs_and_inline_data() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r = c.put("/db/d", &json!({"a": 1, "_attachments": {"note.txt": {"content_type": "text/plain", "data": b64(b"hello")}}}).to_string());
    assert_eq!(r.status, 201, "{}", r.text);
    let rev1 = r.json()["rev"].as_str().unwrap().to_string();
    let doc = c.get("/db/d").json();
    assert_eq!(
        doc["_attachments"]["note.txt"],
        json!({"content_type": "text/plain", "revpos": 1, "digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "stub": true})
    );
    let json_only = [("Accept", "application/json")];
    let with = c
        .send("GET", "/db/d?attachments=true", None, &json_only)
        .json();
    assert_eq!(with["_attachments"]["note.txt"]["data"], b64(b"hello"));
    let info = c.get("/db/d?att_encoding_info=true").json();
    assert_eq!(info["_attachments"]["note.txt"]["encoding"], "gzip");
    // Keep it with a stub, add another; a stub for an unknown name is 412.
    let r = c.put("/db/d", &json!({"_rev": rev1, "_attachments": {"note.txt": {"stub": true}, "x.bin": {"content_type": "application/octet-stream", "data": "AAEC"}}}).to_string());
    let rev2 = r.json()["rev"].as_str().unwrap().to_string();
    c.put(
        "/db/d",
        &json!({"_rev": rev2, "_attachments": {"gone": {"stub": true}}}).to_string(),
    )
    .error(412, "missing_stub");
    let since = c
        .send(
            "GET",
            &format!("/db/d?atts_since=%5B%22{rev1}%22%5D"),
            None,
            &json_only,
        )
        .json();
    assert_eq!(since["_attachments"]["note.txt"]["stub"], true);
    assert_eq!(since["_attachments"]["x.bin"]["data"], "AAEC");
    let listed = c
        .get("/db/_all_docs?include_docs=true&attachments=true")
        .json();
    assert_eq!(
        listed["rows"][0]["doc"]["_attachments"]["x.bin"]["data"],
        "AAEC"
    );
    let changed = c
        .get("/db/_changes?include_docs=true&attachments=true")
        .json();
    assert_eq!(
        changed["results"][0]["doc"]["_attachments"]["x.bin"]["data"],
        "AAEC"
    );
    let bulk = c
        .post("/db/_bulk_get?attachments=true", r#"{"docs":[{"id":"d"}]}"#)
        .json();
    assert_eq!(
        bulk["results"][0]["docs"][0]["ok"]["_attachments"]["x.bin"]["data"],
        "AAEC"
    );
    // Bad input.
    c.put("/db/e", r#"{"_attachments":{"a":{"data":"@@@"}}}"#)
        .error(400, "bad_request");
    c.put("/db/e", r#"{"_attachments":{"_a":{"data":"AA=="}}}"#)
        .error(400, "bad_request");
    c.put("/db/e", r#"{"_attachments":[1]}"#)
        .error(400, "doc_validation");
    c.get("/db/e").error(404, "not_found");
    // COPY takes the attachments along, whichever shard the copy lands in.
    c.put("/db/src", r#"{"v":1,"_attachments":{"t.txt":{"content_type":"text/plain","data":"aGVsbG8gY29weQ=="},"x.bin":{"content_type":"image/png","data":"AAEC"}}}"#);
    for dest in ["copy1", "copy2", "copy3", "copy4"] {
        let r = s.raw(&format!("COPY /db/src HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nDestination: {dest}\r\nConnection: close\r\n\r\n", common::admin_auth()));
        assert!(r.starts_with("HTTP/1.1 201"), "{dest}: {r}");
        assert_eq!(c.get(&format!("/db/{dest}/t.txt")).text, "hello copy");
        assert_eq!(
            c.get(&format!("/db/{dest}/x.bin")).text.as_bytes(),
            [0, 1, 2]
        );
        let (from, to) = (
            c.get("/db/src").json(),
            c.get(&format!("/db/{dest}")).json(),
        );
        assert_eq!(
            from["_attachments"]["t.txt"]["digest"],
            to["_attachments"]["t.txt"]["digest"]
        );
        assert_eq!(to["v"], 1);
    }
}

#[test]
fn standalone_attachments_stream_and_serve_ranges() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let r = c.send(
        "PUT",
        "/db/doc/dir/a.txt",
        Some("hello attachment world"),
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let rev1 = r.json()["rev"].as_str().unwrap().to_string();
    let got = c.get("/db/doc/dir/a.txt");
    assert_eq!(
        (got.status, got.text.as_str(), got.header("content-type")),
        (200, "hello attachment world", Some("text/plain"))
    );
    assert_eq!(
        got.header("accept-ranges"),
        Some("none"),
        "compressed attachments are served whole"
    );
    let etag = got.header("etag").unwrap().to_string();
    assert_eq!(
        c.send(
            "GET",
            "/db/doc/dir/a.txt",
            None,
            &[("If-None-Match", &etag)]
        )
        .status,
        304
    );
    // A 3 MB binary attachment spans several chunks; ranges cross chunk edges.
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let rev2 = put_binary(&s, &format!("/db/doc/big.bin?rev={rev1}"), &big);
    let whole = get_binary(&s, "/db/doc/big.bin", "");
    assert!(whole.0.starts_with("HTTP/1.1 200"), "{}", whole.0);
    assert!(whole
        .0
        .to_ascii_lowercase()
        .contains("content-length: 3000000"));
    assert_eq!(whole.1, big);
    let (head, part) = get_binary(&s, "/db/doc/big.bin", "Range: bytes=1048570-1048599\r\n");
    assert!(head.starts_with("HTTP/1.1 206"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-range: bytes 1048570-1048599/3000000"),
        "{head}"
    );
    assert_eq!(part, &big[1_048_570..1_048_600]);
    let (head, _) = get_binary(&s, "/db/doc/big.bin", "Range: bytes=5000000-\r\n");
    assert!(head.starts_with("HTTP/1.1 416"), "{head}");
    let headers = c.send("HEAD", "/db/doc/big.bin", None, &[]);
    assert_eq!(headers.header("content-length"), Some("3000000"));
    // The document lists both; the old revision keeps only its own.
    let doc = c.get("/db/doc").json();
    assert_eq!(doc["_attachments"]["big.bin"]["length"], 3_000_000);
    assert_eq!(doc["_attachments"]["dir/a.txt"]["revpos"], 1);
    assert!(c.get(&format!("/db/doc?rev={rev1}")).json()["_attachments"]
        .get("big.bin")
        .is_none());
    // Stale revision, missing attachment, delete.
    c.send(
        "PUT",
        &format!("/db/doc/x.txt?rev={rev1}"),
        Some("x"),
        &[("Content-Type", "text/plain")],
    )
    .error(409, "conflict");
    c.send(
        "PUT",
        "/db/doc/x.txt",
        Some("x"),
        &[("Content-Type", "text/plain")],
    )
    .error(409, "conflict");
    c.get("/db/doc/nothing").error(404, "not_found");
    c.delete(&format!("/db/doc/nothing?rev={rev2}"))
        .error(404, "not_found");
    let del = c.delete(&format!("/db/doc/big.bin?rev={rev2}"));
    assert_eq!(del.status, 200, "{}", del.text);
    c.get("/db/doc/big.bin").error(404, "not_found");
    assert_eq!(
        c.get("/db/doc/dir/a.txt").text,
        "hello attachment world",
        "the other attachment stays"
    );
    // Gzip passes through to clients that accept it.
    let (head, body) = get_binary(&s, "/db/doc/dir/a.txt", "Accept-Encoding: gzip\r\n");
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    assert_eq!(&body[..2], [0x1f, 0x8b]);
    // A large compressible attachment is stored gzip-encoded and streamed back decoded.
    let text: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
    let r = c.send(
        "PUT",
        &format!(
            "/db/doc/log.txt?rev={}",
            c.get("/db/doc").json()["_rev"].as_str().unwrap()
        ),
        Some(&text),
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let info = c
        .send(
            "GET",
            "/db/doc?att_encoding_info=true",
            None,
            &[("Accept", "application/json")],
        )
        .json();
    assert_eq!(info["_attachments"]["log.txt"]["encoding"], "gzip");
    assert!(
        info["_attachments"]["log.txt"]["encoded_length"]
            .as_u64()
            .unwrap()
            < text.len() as u64 / 3
    );
    let (head, body) = get_binary(&s, "/db/doc/log.txt", "");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-length: {}", text.len())),
        "{head}"
    );
    assert!(body == text.as_bytes(), "decoded back whole");
    // Design documents carry attachments too.
    assert_eq!(
        c.send(
            "PUT",
            "/db/_design/app/index.html",
            Some("<p>hi</p>"),
            &[("Content-Type", "text/html")]
        )
        .status,
        201
    );
    assert_eq!(c.get("/db/_design/app/index.html").text, "<p>hi</p>");
}

#[test]
fn multipart_related_uploads_and_downloads() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let body = "--BOUND\r\nContent-Type: application/json\r\n\r\n{\"title\":\"m\",\"_attachments\":{\"a.txt\":{\"follows\":true,\"content_type\":\"text/plain\",\"length\":5},\"b.bin\":{\"follows\":true,\"content_type\":\"image/png\",\"length\":3}}}\r\n--BOUND\r\n\r\nhello\r\n--BOUND\r\n\r\n\u{1}\u{2}\u{3}\r\n--BOUND--";
    let r = c.send(
        "PUT",
        "/db/m",
        Some(body),
        &[("Content-Type", "multipart/related; boundary=\"BOUND\"")],
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(c.get("/db/m/a.txt").text, "hello");
    assert_eq!(c.get("/db/m/b.bin").text.as_bytes(), [1, 2, 3]);
    assert_eq!(c.get("/db/m").json()["title"], "m");
    // Without an Accept that excludes it, attachments=true answers multipart/related, with
    // an ETag and each attachment's identity bytes (the compressible text is stored gzip).
    let (head, bytes) = get_binary(&s, "/db/m?attachments=true&att_encoding_info=true", "");
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains("content-type: multipart/related; boundary="),
        "{head}"
    );
    assert!(lower.contains("\r\netag: \"1-"), "{head}");
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("\"follows\":true") && text.contains("\r\n\r\nhello\r\n"),
        "{text}"
    );
    assert!(
        !text.contains("\"encoding\"") && !text.contains("content-encoding"),
        "identity bytes are not called gzip: {text}"
    );
    assert!(
        text.contains("filename=\"a.txt\"") && text.contains("Content-Length: 5"),
        "{text}"
    );
    // What is sent can be sent back, as a replicator does.
    c.put("/db2", "");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap();
    let put = put_typed(&s, "/db2/m?new_edits=false", &content_type, &bytes);
    assert!(put.starts_with("HTTP/1.1 201"), "{put}");
    assert_eq!(c.get("/db2/m/a.txt").text, "hello");
    assert_eq!(c.get("/db2/m/b.bin").text.as_bytes(), [1, 2, 3]);
    let digests =
        |db: &str| c.get(&format!("/{db}/m?att_encoding_info=true")).json()["_attachments"].clone();
    assert_eq!(digests("db2"), digests("db"));
    // CouchDB's replicator sends what CouchDB stores compressed as gzip, saying so: it is
    // kept gzip and reads back whole; gzip that is broken or not of its `length` is refused.
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, b"hello gzip").unwrap();
        e.finish().unwrap()
    };
    let pushed = |id: &str, length: Option<u64>, data: &[u8]| {
        let entry = match length {
            Some(n) => format!(
                r#"{{"follows":true,"content_type":"text/plain","length":{n},"encoding":"gzip","encoded_length":{}}}"#,
                data.len()
            ),
            None => r#"{"follows":true,"content_type":"text/plain","encoding":"gzip"}"#.to_string(),
        };
        let mut body = format!("--B\r\nContent-Type: application/json\r\n\r\n{{\"_id\":\"{id}\",\"_rev\":\"1-abc\",\"_attachments\":{{\"g.txt\":{entry}}}}}\r\n--B\r\n\r\n").into_bytes();
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n--B--");
        put_typed(
            &s,
            &format!("/db2/{id}?new_edits=false"),
            "multipart/related; boundary=B",
            &body,
        )
    };
    assert!(pushed("g", Some(10), &gz).starts_with("HTTP/1.1 201"));
    assert_eq!(c.get("/db2/g/g.txt").text, "hello gzip");
    let info = c.get("/db2/g?att_encoding_info=true").json()["_attachments"]["g.txt"].clone();
    assert_eq!(
        (info["length"].as_u64(), info["encoding"].as_str()),
        (Some(10), Some("gzip")),
        "{info}"
    );
    let mut broken = gz.clone();
    broken[12] ^= 0xff;
    for (id, length, data) in [
        ("g1", Some(10), &broken[..]),
        ("g2", Some(4), &gz[..]),
        ("g3", Some(11), &gz[..]),
        ("g4", None, &gz[..]),
    ] {
        let refused = pushed(id, length, data);
        assert!(refused.starts_with("HTTP/1.1 400"), "{id}: {refused}");
        c.get(&format!("/db2/{id}")).error(404, "not_found");
    }
    // A document without attachments is JSON whatever the client takes.
    c.put("/db/bare", r#"{"x":1}"#);
    let (head, body) = get_binary(&s, "/db/bare?attachments=true", "");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()["x"],
        1
    );
    // _bulk_get as multipart/mixed sends every attachment's bytes unless atts_since leaves them out.
    let rev = c.get("/db/m").json()["_rev"].as_str().unwrap().to_string();
    let bulk_get = |docs: &str| {
        s.raw(&format!("POST /db/_bulk_get HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nAccept: multipart/mixed\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{docs}", common::admin_auth(), docs.len()))
    };
    let all = bulk_get(r#"{"docs":[{"id":"m"}]}"#);
    assert!(
        all.contains("filename=\"b.bin\"") && all.contains("filename=\"a.txt\""),
        "{all}"
    );
    let since = bulk_get(&format!(
        r#"{{"docs":[{{"id":"m","atts_since":["{rev}"]}}]}}"#
    ));
    assert!(
        !since.contains("filename=") && since.contains("\"stub\":true"),
        "{since}"
    );
    // open_revs as multipart/mixed sends every attachment's bytes, asked or not.
    let (head, mixed) = get_binary(&s, "/db/m?open_revs=all", "Accept: multipart/mixed\r\n");
    assert!(
        head.to_ascii_lowercase().contains("multipart/mixed"),
        "{head}"
    );
    let mixed = String::from_utf8_lossy(&mixed);
    assert!(
        mixed.contains("multipart/related")
            && mixed.contains("filename=\"b.bin\"")
            && mixed.contains("\"follows\":true"),
        "{mixed}"
    );
    // Broken multipart bodies change nothing.
    c.send(
        "PUT",
        "/db/n",
        Some("--BOUND\r\nno end"),
        &[("Content-Type", "multipart/related; boundary=BOUND")],
    )
    .error(400, "bad_request");
    let missing = "--B\r\n\r\n{\"_attachments\":{\"a\":{\"follows\":true}}}\r\n--B--";
    c.send(
        "PUT",
        "/db/n",
        Some(missing),
        &[("Content-Type", "multipart/related; boundary=B")],
    )
    .error(400, "bad_request");
    c.get("/db/n").error(404, "not_found");
}

#[test]
fn large_multipart_uploads_stream_into_the_database() {
    use std::io::{Read, Write};
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    // Data that contains near-misses of the delimiter, across many network frames.
    let mut big: Vec<u8> = (0..2_500_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    big[1_000_000..1_000_008].copy_from_slice(b"\r\n--BOUN");
    let json = r#"{"_attachments":{"big.bin":{"follows":true,"content_type":"application/octet-stream","length":2500000},"t.txt":{"follows":true,"content_type":"text/plain","length":4}}}"#;
    let mut body = Vec::new();
    body.extend_from_slice(
        format!("--BOUNDARY\r\nContent-Type: application/json\r\n\r\n{json}\r\n--BOUNDARY\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(&big);
    body.extend_from_slice(
        b"\r\n--BOUNDARY\r\nContent-Type: text/plain\r\n\r\ntext\r\n--BOUNDARY--",
    );
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    let head = format!("PUT /db/mp HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/related; boundary=BOUNDARY\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), body.len());
    stream.write_all(head.as_bytes()).unwrap();
    for piece in body.chunks(7_001) {
        stream.write_all(piece).unwrap();
    }
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let (_, got) = get_binary(&s, "/db/mp/big.bin", "");
    assert!(
        got == big,
        "the attachment came back intact ({} bytes)",
        got.len()
    );
    assert_eq!(c.get("/db/mp/t.txt").text, "text");
    assert_eq!(
        c.get("/db/mp").json()["_attachments"]["big.bin"]["length"],
        2_500_000
    );
    // A body that ends before its closing boundary changes nothing.
    let cut = &body[..body.len() / 2];
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    let head = format!("PUT /db/cut HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Type: multipart/related; boundary=BOUNDARY\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), cut.len());
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(cut).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    c.get("/db/cut").error(404, "not_found");
}

/// PUTs an attachment's bytes on a raw connection; the new revision.
#[test]
fn standalone_attachments_answer_as_couchdb_does() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let data: Vec<u8> = (0..100u8).collect();
    let rev = put_binary(&s, "/db/d/bin", &data);
    // A write answers a Location and no ETag; reads carry CouchDB's sandbox policy and no
    // Content-MD5 (CouchDB 3.5).
    let r = c.send(
        "PUT",
        &format!("/db/d/t.txt?rev={rev}"),
        Some("some text"),
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(
        (r.status, r.header("location").is_some(), r.header("etag")),
        (201, true, None),
        "{}",
        r.text
    );
    let rev = r.json()["rev"].as_str().unwrap().to_string();
    let (head, _) = get_binary(&s, "/db/d/bin", "");
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains("content-security-policy: sandbox") && !lower.contains("content-md5"),
        "{head}"
    );
    // If-None-Match takes a list and weak tags.
    let etag = c.get("/db/d/bin").header("etag").unwrap().to_string();
    for tag in [format!("W/{etag}"), format!("\"other\", {etag}")] {
        assert_eq!(
            c.send("GET", "/db/d/bin", None, &[("If-None-Match", &tag)])
                .status,
            304,
            "{tag}"
        );
    }
    // Ranges as CouchDB reads them: `0-` and headers that do not parse get everything;
    // several ranges come as multipart/byteranges; ranges are checked on gzip-stored ones.
    for whole in ["bytes=0-", "bytes=5-6,0-", "bytes=x-1", "bytes=1"] {
        let (head, body) = get_binary(&s, "/db/d/bin", &format!("Range: {whole}\r\n"));
        assert!(
            head.starts_with("HTTP/1.1 200") && body == data,
            "{whole}: {head}"
        );
    }
    let (head, body) = get_binary(&s, "/db/d/bin", "Range: bytes=0-1,10-12\r\n");
    assert!(
        head.starts_with("HTTP/1.1 206")
            && head
                .to_ascii_lowercase()
                .contains("content-type: multipart/byteranges; boundary=\""),
        "{head}"
    );
    let boundary = head
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let mut expected = format!("--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 0-1/100\r\n\r\n").into_bytes();
    expected.extend([0, 1]);
    expected.extend(format!("\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 10-12/100\r\n\r\n").into_bytes());
    expected.extend([10, 11, 12]);
    expected.extend(format!("\r\n--{boundary}--").into_bytes());
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&expected)
    );
    assert!(get_binary(&s, "/db/d/t.txt", "Range: bytes=5-2\r\n")
        .0
        .starts_with("HTTP/1.1 416"));
    let (head, body) = get_binary(
        &s,
        "/db/d/t.txt",
        "Range: bytes=0-2\r\nAccept-Encoding: gzip;q=0, deflate\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 200")
            && !head.to_ascii_lowercase().contains("content-encoding")
            && body == b"some text",
        "{head}"
    );
    // Revisions: one the document does not have is `missing_rev`; rev and If-Match must
    // agree; a DELETE without a revision first finds the document and the attachment.
    let missing = c.send(
        "PUT",
        "/db/d/x.txt?rev=1-0123456789abcdef0123456789abcdef",
        Some("x"),
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(
        (
            missing.status,
            missing.json()["error"].as_str(),
            missing.json()["reason"].as_str()
        ),
        (409, Some("not_found"), Some("missing_rev"))
    );
    let r = c.send(
        "DELETE",
        &format!("/db/d/bin?rev={rev}"),
        None,
        &[("If-Match", "\"1-abc\"")],
    );
    assert_eq!(
        r.error(400, "bad_request").json()["reason"],
        "Document rev and etag have different values"
    );
    c.delete("/db/nodoc/bin").error(404, "not_found");
    assert_eq!(
        c.delete("/db/d/none").error(404, "not_found").json()["reason"],
        "Document is missing attachment"
    );
    c.delete("/db/d/bin").error(409, "conflict");
    c.delete(&format!("/db/d/_bin?rev={rev}"))
        .error(400, "bad_request");
    let gone = c.delete(&format!("/db/d/bin?rev={rev}"));
    assert_eq!(
        (gone.status, gone.header("etag")),
        (200, None),
        "{}",
        gone.text
    );
    // Bytes sent gzip-encoded are kept so and read back as what they encode.
    let text = "gzip sent, gzip kept ".repeat(50);
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let out = put_raw(
        &s,
        "/db/z/a.txt",
        "Content-Type: text/plain\r\nContent-Encoding: gzip\r\n",
        &gz,
    );
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
    assert_eq!(c.get("/db/z/a.txt").text, text);
    let info = c
        .send(
            "GET",
            "/db/z?att_encoding_info=true",
            None,
            &[("Accept", "application/json")],
        )
        .json();
    assert_eq!(
        (
            info["_attachments"]["a.txt"]["length"].as_u64(),
            info["_attachments"]["a.txt"]["encoding"].as_str()
        ),
        (Some(text.len() as u64), Some("gzip"))
    );
    let out = put_raw(
        &s,
        "/db/z2/a.txt",
        "Content-Type: text/plain\r\nContent-Encoding: br\r\n",
        b"x",
    );
    assert!(
        out.starts_with("HTTP/1.1 415")
            && out.contains("Only gzip and identity content-encodings are supported"),
        "{out}"
    );
    let out = put_raw(
        &s,
        "/db/z3/a.txt",
        "Content-Type: text/plain\r\nContent-Encoding: gzip\r\n",
        b"not gzip at all",
    );
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    c.get("/db/z2").error(404, "not_found");
    c.get("/db/z3").error(404, "not_found");
}

fn put_binary(s: &TestServer, path: &str, body: &[u8]) -> String {
    let out = put_typed(s, path, "application/octet-stream", body);
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
    let json: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    json["rev"].as_str().unwrap().to_string()
}

fn get_binary(s: &TestServer, path: &str, extra: &str) -> (String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\n{extra}Connection: close\r\n\r\n",
        common::admin_auth()
    )
    .unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let mut body = out[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (head, body)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..line]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[line + 2..line + 2 + size]);
        data = &data[line + 2 + size + 2..];
    }
}

/// PUTs a binary body of a content type on a raw connection; the whole answer.
fn put_typed(s: &TestServer, path: &str, content_type: &str, body: &[u8]) -> String {
    put_raw(s, path, &format!("Content-Type: {content_type}\r\n"), body)
}

/// A PUT of `body` with the `headers` given (each ending in CRLF); the whole answer.
fn put_raw(s: &TestServer, path: &str, headers: &str, body: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    write!(stream, "PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n", common::admin_auth(), body.len()).unwrap();
    stream.write_all(body).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out).into_owned()
}
