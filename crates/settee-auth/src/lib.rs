//! The security model of CouchDB 3, without HTTP: callers and roles, password hashes in the
//! config file and in `_users` documents, signed session cookies, and per-database security
//! objects (database admins and members).
//!
//! * [`User`]: who is asking; server admins hold `_admin`.
//! * [`SecurityObject`]: a database's `_security`, deciding who is a member or an admin.
//! * [`password`]: PBKDF2 hashing and checking.
//! * [`cookie`]: `AuthSession` cookies.
//! * [`users`]: the rules of the users database.
//! * [`jwt`]: JSON Web Token checks.
//! * [`proxy`]: proxy authentication tokens.
//! * [`lockout`]: refusing repeated failed logins.

#![deny(missing_docs)]

pub mod cookie;
mod error;
pub mod jwt;
pub mod lockout;
pub mod password;
pub mod proxy;
mod security;
mod user;
pub mod users;

pub use error::{Error, Result};
pub use security::{Denied, Group, SecurityObject};
pub use user::{user_ctx, User, ADMIN_ROLE};
