//! Reads with a user context: in the users and replicator databases, what a caller who does
//! not administer the database may see of a document is decided here, for every path that
//! shows documents.

use settee_auth::User;
use settee_db::Database;

use crate::error::Result;
use crate::replicator::is_replicator_db;
use crate::security::is_db_admin;
use crate::Node;

/// How much of a database's documents one caller sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Everything stored.
    Whole,
    /// User documents through the users database's rules (their own whole, others' public
    /// fields only, no design documents).
    Users,
    /// Replication documents without the credentials of those they do not own.
    Replications,
}

impl Visibility {
    /// Whether documents are shown as stored.
    pub fn is_whole(self) -> bool {
        self == Visibility::Whole
    }

    /// Fails unless a read that is not `plain` may be made: only the current revision's
    /// body can be filtered, so a caller who sees filtered documents may not ask for other
    /// revisions, their history, conflicts, attachments' data or sequence (an old revision
    /// of a user document holds a password hash).
    pub fn check_read(self, plain: bool) -> Result<()> {
        if plain || self.is_whole() {
            Ok(())
        } else {
            Err(crate::Error::Forbidden(
                "Only admins may read user documents with these options.".into(),
            ))
        }
    }
}

impl Node {
    /// How much of `db`'s documents `user` sees.
    pub fn visibility(&self, user: Option<&User>, db: &Database) -> Result<Visibility> {
        let kind = if self.is_users_db(db.name()) {
            Visibility::Users
        } else if is_replicator_db(db.name()) {
            Visibility::Replications
        } else {
            return Ok(Visibility::Whole);
        };
        Ok(if is_db_admin(user, db)? {
            Visibility::Whole
        } else {
            kind
        })
    }

    /// Document `id` of a database, rendered as `doc`, as `user` may see it under
    /// `visibility` (from [`Node::visibility`]).
    pub fn visible_doc(
        &self,
        visibility: Visibility,
        user: Option<&User>,
        id: &str,
        doc: Vec<u8>,
    ) -> Result<Vec<u8>> {
        match visibility {
            Visibility::Whole => Ok(doc),
            Visibility::Users => {
                crate::users::visible(user, &self.policy().public_fields, id, &doc)
            }
            Visibility::Replications => Ok(crate::replicator::visible(user, doc)),
        }
    }

    /// Whether `db` is the users database. (On every read and write: looks at the policy
    /// without taking a reference to it.)
    pub fn is_users_db(&self, db: &str) -> bool {
        db == self.policy.load().users_db
    }
}
