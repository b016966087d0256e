//! View languages whose map functions run natively, in Rust, instead of in a JavaScript
//! engine or a query server: Mango's `query` language is one. A language is registered with
//! [`crate::Views`] by name; its design documents' `map` members are JSON (objects, for
//! Mango), handed to the language as JSON text.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// A native view language: compiles the map definitions of one design document's views.
pub trait NativeLanguage: Send + Sync {
    /// The program mapping documents into every view of a design document, given each
    /// view's `map` member as JSON text (in view order). A definition the language cannot
    /// read makes a view that indexes nothing, as CouchDB's Mango treats one.
    fn compile(&self, maps: &[&str]) -> Arc<dyn NativeMap>;
}

/// A compiled native map program.
pub trait NativeMap: Send + Sync {
    /// The `(key, value)` rows `doc` emits into each view, in view order.
    fn map(&self, doc: &Value) -> Vec<Vec<(Value, Value)>>;
}

/// The native languages, by name.
pub type NativeLanguages = HashMap<String, Arc<dyn NativeLanguage>>;
