//! Apache CouchDB 3.x's HTTP API over Settee's databases.
//!
//! [`State::prepare`] reads the configuration (creating the first admin when there is none)
//! and opens the data directory; [`serve`] answers connections. Requests are authenticated
//! (`auth`), routed by path segment (`server`), handled by resource (`node`, `db`, `doc`,
//! `bulk`, `changes`, `view`) and answered with CouchDB's JSON, status codes and errors (`error` holds
//! the one table that maps failures to them). Large results stream (`reply`).
//!
//! This is the only crate that knows HTTP.

#![deny(missing_docs)]

mod access;
mod att;
mod auth;
mod bulk;
mod bulk_body;
mod changes;
pub use settee_config as config;
mod connections;
mod cors;
mod db;
mod doc;
mod doc_query;
mod error;
mod find;
mod form;
mod multipart;
mod node;
mod openrevs;
mod partition;
mod render;
mod replicate;
mod reply;
mod request;
mod rewrite;
mod search;
mod server;
mod settings;
mod stats;
mod tls;
mod utils;
mod view;

pub use auth::{hash_password, verify_password};
pub use config::Config;
pub use error::HttpError;
pub use node::NODE as NODE_NAME;
pub use server::{
    serve, set_access_writer, Prepared, ServerOptions, State, ACCESS_LOG, SERVER_HEADER, VERSION,
};
pub use tls::{acceptor as tls_acceptor, serve_tls};
