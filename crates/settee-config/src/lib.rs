//! Settee's configuration: the INI file with CouchDB's sections and keys ([`Config`]), and
//! the registry of every setting with its default ([`registry`]).

mod ini;
pub mod registry;

pub use ini::Config;
pub use registry::Setting;
