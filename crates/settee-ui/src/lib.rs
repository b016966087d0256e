//! Settee's admin UI, served at `/_utils`: plain HTML, CSS and JavaScript modules written
//! in this repository (`ui/`), embedded in the binary, talking only to the public HTTP API.
//!
//! Files are served under a versioned prefix, `/_utils/v/{version}/…`, where the version is
//! a hash of every file: they can be cached for a year, and a new build's files get new
//! URLs. `index.html`, which names the prefix, is never cached. Every file is kept gzipped
//! too, made once on first use.

#![deny(missing_docs)]

use std::collections::HashMap;
use std::io::Write;
use std::sync::OnceLock;

/// The UI's files, by path under `ui/`.
static FILES: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../ui/index.html")),
    ("app.css", include_bytes!("../ui/app.css")),
    ("js/api.js", include_bytes!("../ui/js/api.js")),
    ("js/json.js", include_bytes!("../ui/js/json.js")),
    ("js/main.js", include_bytes!("../ui/js/main.js")),
    ("js/ui.js", include_bytes!("../ui/js/ui.js")),
    (
        "js/views/databases.js",
        include_bytes!("../ui/js/views/databases.js"),
    ),
    (
        "js/views/dbmisc.js",
        include_bytes!("../ui/js/views/dbmisc.js"),
    ),
    (
        "js/views/dbnav.js",
        include_bytes!("../ui/js/views/dbnav.js"),
    ),
    ("js/views/docs.js", include_bytes!("../ui/js/views/docs.js")),
    (
        "js/views/query.js",
        include_bytes!("../ui/js/views/query.js"),
    ),
    (
        "js/views/server.js",
        include_bytes!("../ui/js/views/server.js"),
    ),
];

/// One file as served: its bytes, gzipped, and its type.
#[derive(Debug)]
pub struct File {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The bytes gzipped.
    pub gzipped: Vec<u8>,
    /// Its `Content-Type`.
    pub content_type: &'static str,
}

/// The version in the files' URLs: a hash of every file's path and bytes.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut hash = crc32fast::Hasher::new();
        for (path, bytes) in FILES {
            hash.update(path.as_bytes());
            hash.update(bytes);
        }
        format!("{:08x}", hash.finalize())
    })
}

/// The page at `/_utils/`: `index.html` with the files' prefix in it.
pub fn index() -> &'static File {
    &files()["index.html"]
}

/// The file at `path` under the versioned prefix (`index.html` is [`index`]).
pub fn asset(path: &str) -> Option<&'static File> {
    files().get(path).filter(|_| path != "index.html")
}

fn files() -> &'static HashMap<&'static str, File> {
    static FILES_SERVED: OnceLock<HashMap<&'static str, File>> = OnceLock::new();
    FILES_SERVED.get_or_init(|| {
        FILES
            .iter()
            .map(|(path, bytes)| {
                let bytes = if *path == "index.html" {
                    let base = format!("v/{}", version());
                    String::from_utf8_lossy(bytes)
                        .replace("{{base}}", &base)
                        .into_bytes()
                } else {
                    bytes.to_vec()
                };
                let file = File {
                    gzipped: gzip(&bytes),
                    bytes,
                    content_type: content_type(path),
                };
                (*path, file)
            })
            .collect()
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}

/// The `Content-Type` of a file by its extension.
fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_embedded_and_typed() {
        let index = String::from_utf8(index().bytes.clone()).unwrap();
        assert!(index.contains(&format!("v/{}/js/main.js", version())));
        assert!(!index.contains("{{base}}"));
        let main = asset("js/main.js").expect("main.js");
        assert_eq!(main.content_type, "text/javascript; charset=utf-8");
        assert!(main.gzipped.len() < main.bytes.len());
        assert_eq!(
            asset("app.css").unwrap().content_type,
            "text/css; charset=utf-8"
        );
        assert!(asset("index.html").is_none());
        assert!(asset("nope.js").is_none());
    }

    #[test]
    fn every_module_the_ui_imports_is_embedded() {
        for (path, bytes) in FILES.iter().filter(|(p, _)| p.ends_with(".js")) {
            let text = String::from_utf8_lossy(bytes);
            let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let spec = line
                    .rsplit_once("from \"")
                    .unwrap()
                    .1
                    .trim_end_matches("\";");
                let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
                for seg in spec.split('/') {
                    match seg {
                        "." => {}
                        ".." => {
                            parts.pop();
                        }
                        s => parts.push(s),
                    }
                }
                let target = parts.join("/");
                assert!(
                    asset(&target).is_some(),
                    "{path} imports {target}, which is not embedded"
                );
            }
        }
    }

    #[test]
    fn the_first_load_stays_small() {
        let total: usize = files().values().map(|f| f.gzipped.len()).sum();
        assert!(total < 300 * 1024, "{total} bytes gzipped");
    }
}
