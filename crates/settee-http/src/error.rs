//! The one table from every failure to CouchDB's status code, `error` and `reason`.

use settee_db::Error as DbError;
use settee_js::Error as JsError;
use settee_queryserver::Error as QsError;
use settee_views::Error as ViewError;

/// A failed request as CouchDB reports it: `{"error": …, "reason": …}` with a status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// HTTP status code.
    pub status: u16,
    /// CouchDB's error name.
    pub error: String,
    /// Human-readable reason.
    pub reason: String,
    /// Methods to list in `Allow` (for 405).
    pub allow: Option<&'static str>,
    /// Close the connection after answering (what the client sent past the request cannot
    /// be taken for another).
    pub close: bool,
}

impl HttpError {
    /// Any error.
    pub fn new(status: u16, error: &str, reason: impl Into<String>) -> HttpError {
        HttpError {
            status,
            error: error.to_string(),
            reason: reason.into(),
            allow: None,
            close: false,
        }
    }

    /// 400 `bad_request`.
    pub fn bad_request(reason: impl Into<String>) -> HttpError {
        HttpError::new(400, "bad_request", reason)
    }

    /// 400 `query_parse_error`.
    pub fn query_parse(reason: impl Into<String>) -> HttpError {
        HttpError::new(400, "query_parse_error", reason)
    }

    /// 404 `not_found`.
    pub fn not_found(reason: impl Into<String>) -> HttpError {
        HttpError::new(404, "not_found", reason)
    }

    /// 405 with the allowed methods, e.g. `"GET,HEAD"`.
    pub fn method_not_allowed(allow: &'static str) -> HttpError {
        HttpError {
            allow: Some(allow),
            ..HttpError::new(405, "method_not_allowed", format!("Only {allow} allowed"))
        }
    }

    /// 415 for a body that is not JSON.
    pub fn bad_content_type() -> HttpError {
        HttpError::new(
            415,
            "bad_content_type",
            "Content-Type must be application/json",
        )
    }

    /// An error a design function raised by name, with the status CouchDB gives that name
    /// (500 for names it does not know), renamed or reworded where CouchDB does.
    pub fn named(error: &str, reason: String) -> HttpError {
        let status = match error {
            "bad_request" | "query_parse_error" | "illegal_docid" | "doc_validation" => 400,
            "unauthorized" => 401,
            "forbidden" => 403,
            "not_found" => 404,
            "method_not_allowed" => 405,
            "not_acceptable" => 406,
            "conflict" => return HttpError::new(409, "conflict", "Document update conflict."),
            "missing_stub" => 412,
            "request_entity_too_large" => return HttpError::new(413, "document_too_large", reason),
            "bad_ctype" => return HttpError::new(415, "bad_content_type", reason),
            "invalid_json" => return HttpError::bad_request("invalid UTF-8 JSON"),
            "timeout" => {
                return HttpError::new(
                    500,
                    "timeout",
                    "The request could not be processed in a reasonable amount of time.",
                )
            }
            _ => 500,
        };
        HttpError::new(status, error, reason)
    }

    /// The JSON body (without the trailing newline).
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"error": self.error, "reason": self.reason}))
            .expect("json")
    }
}

impl From<settee_node::Error> for HttpError {
    fn from(e: settee_node::Error) -> HttpError {
        use settee_node::Error as N;
        match e {
            N::Db(e) => HttpError::from(&*e),
            N::Views(e) => HttpError::from(&*e),
            N::QueryServer(e) => HttpError::from(&*e),
            N::Mango(e) => HttpError::from(&*e),
            N::Unauthorized(reason) => HttpError::new(401, "unauthorized", reason),
            N::Forbidden(reason) => HttpError::new(403, "forbidden", reason),
            N::NotFound(reason) => HttpError::not_found(reason),
            N::BadRequest(reason) => HttpError::bad_request(reason),
            N::Compilation(reason) => HttpError::new(400, "compilation_error", reason),
            N::Refused { error, reason } => HttpError::named(&error, reason),
            N::Failed(reason) => HttpError::new(500, "unknown_error", reason),
        }
    }
}

impl From<settee_mango::Error> for HttpError {
    fn from(e: settee_mango::Error) -> HttpError {
        HttpError::from(&e)
    }
}

impl From<&settee_mango::Error> for HttpError {
    fn from(e: &settee_mango::Error) -> HttpError {
        match e {
            settee_mango::Error::Selector(reason) => HttpError::bad_request(reason.clone()),
            settee_mango::Error::Query { error, reason } => {
                HttpError::new(400, error, reason.clone())
            }
            settee_mango::Error::Db(e) => HttpError::from(e),
            settee_mango::Error::Views(e) => HttpError::from(e),
            settee_mango::Error::Search(e) => HttpError::from(e),
            settee_mango::Error::Status {
                status,
                error,
                reason,
            } => HttpError::new(*status, error, reason.clone()),
        }
    }
}

impl From<DbError> for HttpError {
    fn from(e: DbError) -> HttpError {
        HttpError::from(&e)
    }
}

impl From<&DbError> for HttpError {
    fn from(e: &DbError) -> HttpError {
        let reason = e.to_string();
        match e {
            DbError::NoDatabase => HttpError::not_found(reason),
            DbError::DatabaseExists => HttpError::new(412, "file_exists", reason),
            DbError::IllegalDatabaseName(_) => HttpError::new(400, "illegal_database_name", reason),
            DbError::NotFound(r) => HttpError::not_found(*r),
            DbError::Conflict => HttpError::new(409, "conflict", reason),
            DbError::BadRequest(r) => HttpError::bad_request(r.clone()),
            DbError::DocValidation(r) => HttpError::new(400, "doc_validation", r.clone()),
            DbError::IllegalDocId(r) => HttpError::new(400, "illegal_docid", r.clone()),
            DbError::IllegalPartition(r) => HttpError::new(400, "illegal_partition", r.clone()),
            DbError::DocumentTooLarge(id) => HttpError::new(413, "document_too_large", id.clone()),
            DbError::AttachmentTooLarge(id) => {
                HttpError::new(413, "attachment_too_large", id.clone())
            }
            DbError::BadSequence => HttpError::bad_request(reason),
            DbError::MissingStub(..) => HttpError::new(412, "missing_stub", reason),
            DbError::NoAttachment => HttpError::not_found(reason),
            DbError::Filter(f) => HttpError::new(500, &f.error, f.reason.clone()),
            _ if disk_full(e) => full_disk(&reason),
            DbError::Corrupted(_) | DbError::Store(_) | DbError::Io { .. } => {
                tracing::error!(error = %reason, "storage failure");
                HttpError::new(500, "unknown_error", reason)
            }
        }
    }
}

/// Whether a database error is the disk being full.
fn disk_full(e: &DbError) -> bool {
    let full = |s: &std::io::Error| s.kind() == std::io::ErrorKind::StorageFull;
    matches!(e, DbError::Store(settee_store::Error::Io { source, .. }) if full(source))
        || matches!(e, DbError::Io { source, .. } if full(source))
}

/// A write the disk had no room for: 507 with CouchDB's error name (spelt as CouchDB spells
/// it) and reason. Nothing was written; writes succeed again once there is room.
fn full_disk(detail: &str) -> HttpError {
    tracing::warn!(error = %detail, "the disk is full");
    HttpError::new(507, "insufficent_storage", "database_dir is too full")
}

impl From<ViewError> for HttpError {
    fn from(e: ViewError) -> HttpError {
        HttpError::from(&e)
    }
}

impl From<&ViewError> for HttpError {
    fn from(e: &ViewError) -> HttpError {
        let reason = e.to_string();
        match e.root() {
            ViewError::Db(d) => HttpError::from(d),
            ViewError::Shared(_) => HttpError::new(500, "unknown_error", reason),
            ViewError::NotFound(r) => HttpError::not_found(*r),
            ViewError::QueryParse(r) => HttpError::query_parse(r.clone()),
            ViewError::BadRequest(r) => HttpError::bad_request(r.clone()),
            ViewError::MissingKey(_) => HttpError::not_found(reason),
            ViewError::InvalidDesignDoc(r) => HttpError::new(400, "invalid_design_doc", r.clone()),
            ViewError::UnknownLanguage(l) => {
                HttpError::new(500, "unknown_query_language", l.clone())
            }
            ViewError::Reduce { error, reason } => HttpError::new(500, error, reason.clone()),
            ViewError::Js(e) => HttpError::from(e),
            ViewError::QueryServer(e) => HttpError::from(e),
            ViewError::Store(settee_store::Error::Io { source, .. })
            | ViewError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::StorageFull =>
            {
                full_disk(&reason)
            }
            ViewError::Store(_) | ViewError::Corrupted(_) | ViewError::Io { .. } => {
                tracing::error!(error = %reason, "index failure");
                HttpError::new(500, "unknown_error", reason)
            }
        }
    }
}

impl From<settee_search::Error> for HttpError {
    fn from(e: settee_search::Error) -> HttpError {
        HttpError::from(&e)
    }
}

impl From<&settee_search::Error> for HttpError {
    fn from(e: &settee_search::Error) -> HttpError {
        use settee_search::Error as S;
        let reason = e.to_string();
        match e {
            S::Shared(inner) => HttpError::from(inner.as_ref()),
            S::Db(d) => HttpError::from(d),
            S::Js(e) => HttpError::from(e),
            S::NotFound(r) => HttpError::not_found(r.clone()),
            S::UnknownAnalyzer(n) => {
                HttpError::bad_request(format!("{n} is not a valid analyzer name"))
            }
            S::BadAnalyzer(r) | S::QueryParse(r) | S::BadRequest(r) => {
                HttpError::bad_request(r.clone())
            }
            S::InvalidDesignDoc(r) => HttpError::new(400, "invalid_design_doc", r.clone()),
            S::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                full_disk(&reason)
            }
            S::Index(_) | S::Io { .. } | S::Corrupted(_) => {
                tracing::error!(error = %reason, "search index failure");
                HttpError::new(500, "unknown_error", reason)
            }
        }
    }
}

impl From<&JsError> for HttpError {
    fn from(e: &JsError) -> HttpError {
        match e {
            JsError::Compile(r) => HttpError::new(400, "compilation_error", r.clone()),
            JsError::Timeout(_) => HttpError::new(500, "os_process_error", "OS process timed out."),
            JsError::OutOfMemory => {
                HttpError::new(500, "os_process_error", "OS process ran out of memory.")
            }
            JsError::Raised { error, reason } => HttpError::new(500, error, reason.clone()),
            JsError::Engine(r) => HttpError::new(500, "os_process_error", r.clone()),
        }
    }
}

impl From<&QsError> for HttpError {
    fn from(e: &QsError) -> HttpError {
        match e {
            QsError::UnknownLanguage(l) => HttpError::new(500, "unknown_query_language", l.clone()),
            QsError::Timeout(_) => HttpError::new(500, "os_process_error", "OS process timed out."),
            QsError::Raised { error, reason } => HttpError::new(500, error, reason.clone()),
            QsError::Spawn { .. } | QsError::Process(_) => {
                tracing::error!(error = %e, "query server failure");
                HttpError::new(500, "os_process_error", e.to_string())
            }
        }
    }
}

/// Result of a request handler.
pub type HttpResult<T> = Result<T, HttpError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_database_error_has_couchdbs_status_and_name() {
        let table: Vec<(DbError, u16, &str, &str)> = vec![
            (DbError::NoDatabase, 404, "not_found", "Database does not exist."),
            (DbError::DatabaseExists, 412, "file_exists", "The database could not be created, the file already exists."),
            (DbError::IllegalDatabaseName("A".into()), 400, "illegal_database_name", "Name: 'A'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."),
            (DbError::NotFound("missing"), 404, "not_found", "missing"),
            (DbError::NotFound("deleted"), 404, "not_found", "deleted"),
            (DbError::Conflict, 409, "conflict", "Document update conflict."),
            (DbError::BadRequest("Invalid rev format".into()), 400, "bad_request", "Invalid rev format"),
            (DbError::DocValidation("Bad special document member: _x".into()), 400, "doc_validation", "Bad special document member: _x"),
            (DbError::IllegalDocId("Document id must not be empty".into()), 400, "illegal_docid", "Document id must not be empty"),
            (DbError::DocumentTooLarge("big".into()), 413, "document_too_large", "big"),
            (DbError::AttachmentTooLarge("d".into()), 413, "attachment_too_large", "d"),
            (DbError::BadSequence, 400, "bad_request", "Malformed sequence supplied in 'since' parameter."),
            (DbError::MissingStub("d".into(), "a".into()), 412, "missing_stub", "Invalid attachment stub in d for a"),
            (DbError::NoAttachment, 404, "not_found", "Document is missing attachment"),
            (DbError::Corrupted("x"), 500, "unknown_error", "stored data is damaged: x"),
            (DbError::Store(settee_store::Error::Io { op: "write", source: std::io::Error::from(std::io::ErrorKind::StorageFull) }), 507, "insufficent_storage", "database_dir is too full"),
            (DbError::Io { op: "create database", source: std::io::Error::from(std::io::ErrorKind::StorageFull) }, 507, "insufficent_storage", "database_dir is too full"),
            (DbError::Store(settee_store::Error::Io { op: "sync", source: std::io::Error::other("EIO") }), 500, "unknown_error", "I/O error during sync: EIO"),
        ];
        for (err, status, name, reason) in table {
            let h = HttpError::from(err);
            assert_eq!(
                (h.status, h.error.as_str(), h.reason.as_str()),
                (status, name, reason)
            );
        }
    }
}
