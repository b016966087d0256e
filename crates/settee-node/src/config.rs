//! Changing the configuration while the node runs, as CouchDB's `/_node/_local/_config`
//! does: sections that may not change live are refused, keys and values that the file could
//! not hold as given are refused, admin passwords are stored hashed, and every change takes
//! effect at once.

use settee_auth::password::{hash_password, is_hashed, DEFAULT_ITERATIONS};

use crate::error::{Error, Result};
use crate::start::plaintext_admins;
use crate::Node;

/// Why the file could not be written.
fn io(e: std::io::Error) -> Error {
    Error::Failed(format!("could not write the configuration: {e}"))
}

impl Node {
    /// Forgets the changes made in memory only and takes in changes made to the file; admin
    /// passwords written into the file by hand are hashed there, as at start.
    pub fn reload_config(&self) -> Result<()> {
        let plaintext = {
            let mut config = self.config.write().expect("config lock");
            config
                .reload()
                .map_err(|e| Error::BadRequest(format!("could not read the configuration: {e}")))?;
            plaintext_admins(&config)
        };
        // Outside the lock: hashing is slow.
        for (name, password) in plaintext {
            let hash = hash_password(&password, DEFAULT_ITERATIONS);
            let mut config = self.config.write().expect("config lock");
            if config.get("admins", &name) == Some(password.as_str()) {
                if let Err(e) = config.set("admins", &name, &hash) {
                    drop(config);
                    self.apply_config();
                    return Err(io(e));
                }
            }
        }
        self.apply_config();
        Ok(())
    }

    /// Sets `[section] key = value` (in the file too when `persist`), an admin's password
    /// hashed; the value it had.
    pub fn set_config(
        &self,
        section: &str,
        key: &str,
        value: &str,
        persist: bool,
    ) -> Result<Option<String>> {
        check_config_key(section, key)?;
        if !line_safe(value) {
            return Err(Error::BadRequest("Invalid configuration value".into()));
        }
        let value = if section == "admins" && !is_hashed(value) {
            hash_password(value, DEFAULT_ITERATIONS)
        } else {
            value.to_string()
        };
        let old = {
            let mut config = self.config.write().expect("config lock");
            if persist {
                config.set(section, key, &value).map_err(io)
            } else {
                Ok(config.set_unsaved(section, key, &value))
            }
        };
        // Applied even when the file could not be written: memory holds the new value.
        self.apply_config();
        old
    }

    /// Deletes `[section] key` (from the file too when `persist`); the value it had.
    pub fn delete_config(&self, section: &str, key: &str, persist: bool) -> Result<Option<String>> {
        check_config_key(section, key)?;
        let old = {
            let mut config = self.config.write().expect("config lock");
            if config.get(section, key).is_none() {
                return Err(Error::NotFound("unknown_config_value".into()));
            }
            if persist {
                config.delete(section, key).map_err(io)
            } else {
                Ok(config.delete_unsaved(section, key))
            }
        };
        self.apply_config();
        old
    }
}

/// Fails unless `section`/`key` may be changed while running and can be written to the INI
/// file as they are, with CouchDB's answers (callers check before reading a new value, as
/// CouchDB does).
pub fn check_config_key(section: &str, key: &str) -> Result<()> {
    if settee_config::registry::LOCKED_SECTIONS.contains(&section) {
        return Err(Error::Forbidden(
            "Config section blacklisted for modification over HTTP API.".into(),
        ));
    }
    // Section names are plain words: one that the file's loader would read as another (a
    // locked one behind spaces, say) cannot be written.
    if section.is_empty()
        || !section
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-@:".contains(c))
    {
        return Err(Error::BadRequest("Invalid configuration section".into()));
    }
    if key.is_empty() || !line_safe(key) || key.contains(['[', ']', '=']) || key.trim() != key {
        return Err(Error::BadRequest("Invalid configuration key".into()));
    }
    Ok(())
}

/// Whether `text` fits on one line of the INI file.
fn line_safe(text: &str) -> bool {
    !text.chars().any(|c| c.is_control() && c != '\t')
}
