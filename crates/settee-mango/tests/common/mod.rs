//! A database catalog in a temporary directory and the views registry over it, with Mango's
//! native language, as a node sets them up.

#![allow(dead_code)]

use settee_db::{Catalog, CatalogOptions};
use settee_views::{Views, ViewsConfig};

/// A catalog in a new temporary directory (kept alive by the returned guard).
pub fn catalog_and_views() -> (tempfile::TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path(), CatalogOptions::default()).unwrap();
    (dir, catalog)
}

/// The views of `catalog`, with Mango's `query` language.
pub fn views_of(catalog: &Catalog) -> Views {
    Views::new(ViewsConfig {
        workers: 2,
        limits: Default::default(),
        reduce_limit: true,
        store: catalog.store_options().clone(),
        servers: Default::default(),
        natives: settee_mango::native_languages(),
    })
}
