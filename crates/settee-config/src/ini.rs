//! The INI configuration file, with CouchDB's section and key names, readable and writable
//! at runtime (`/_node/_local/_config`) and persisted on every change unless the change asks
//! to stay in memory (CouchDB's `X-Couch-Persist: false`).

use std::path::{Path, PathBuf};

/// Sections of `key = value` lines, in file order.
type Sections = Vec<(String, Vec<(String, String)>)>;

/// The configuration in force, and what its file holds: changes made in memory only are in
/// the first and not the second, so writing the file for another change leaves them out and
/// reading it again ([`Config::reload`]) forgets them.
#[derive(Clone, Debug, Default)]
pub struct Config {
    path: PathBuf,
    sections: Sections,
    saved: Sections,
}

impl Config {
    /// Reads `path`; a missing file is an empty configuration that will be created there.
    pub fn load(path: &Path) -> std::io::Result<Config> {
        let sections = read_file(path)?;
        Ok(Config {
            path: path.to_path_buf(),
            saved: sections.clone(),
            sections,
        })
    }

    /// Reads the file again, in place of everything in force: changes made in memory only
    /// are forgotten, and changes made to the file by hand take effect.
    pub fn reload(&mut self) -> std::io::Result<()> {
        self.sections = read_file(&self.path)?;
        self.saved = self.sections.clone();
        Ok(())
    }

    /// The file this configuration lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A value.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.section(section)?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A value parsed, or `default` when absent or unparsable.
    pub fn get_or<T: std::str::FromStr>(&self, section: &str, key: &str, default: T) -> T {
        self.get(section, key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// The keys and values of one section.
    pub fn section(&self, name: &str) -> Option<&[(String, String)]> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, kv)| kv.as_slice())
    }

    /// Every section.
    pub fn sections(&self) -> &[(String, Vec<(String, String)>)] {
        &self.sections
    }

    /// Sets a value and writes the file; returns the old value.
    pub fn set(
        &mut self,
        section: &str,
        key: &str,
        value: &str,
    ) -> std::io::Result<Option<String>> {
        put(&mut self.saved, section, key, value);
        let old = put(&mut self.sections, section, key, value);
        self.save()?;
        Ok(old)
    }

    /// Sets a value in memory only; returns the old value.
    pub fn set_unsaved(&mut self, section: &str, key: &str, value: &str) -> Option<String> {
        put(&mut self.sections, section, key, value)
    }

    /// Removes a value and writes the file; returns the old value.
    pub fn delete(&mut self, section: &str, key: &str) -> std::io::Result<Option<String>> {
        let old = remove(&mut self.sections, section, key);
        if remove(&mut self.saved, section, key).is_some() {
            self.save()?;
        }
        Ok(old)
    }

    /// Removes a value in memory only (the file keeps it); returns the old value.
    pub fn delete_unsaved(&mut self, section: &str, key: &str) -> Option<String> {
        remove(&mut self.sections, section, key)
    }

    /// Writes what the file holds, atomically (a new file renamed over the old one).
    pub fn save(&self) -> std::io::Result<()> {
        let mut text = String::new();
        for (name, kv) in &self.saved {
            text.push_str(&format!("[{name}]\n"));
            for (k, v) in kv {
                text.push_str(&format!("{k} = {v}\n"));
            }
            text.push('\n');
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("ini.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// The sections of the INI file at `path`; none if there is no file.
fn read_file(path: &Path) -> std::io::Result<Sections> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let mut sections = Sections::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            put(&mut sections, &section, k.trim(), v.trim());
        }
    }
    Ok(sections)
}

/// Sets `section`/`key` to `value`; returns the old value.
fn put(sections: &mut Sections, section: &str, key: &str, value: &str) -> Option<String> {
    let kv = match sections.iter_mut().position(|(n, _)| n == section) {
        Some(i) => &mut sections[i].1,
        None => {
            sections.push((section.to_string(), Vec::new()));
            &mut sections.last_mut().expect("just pushed").1
        }
    };
    match kv.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => Some(std::mem::replace(v, value.to_string())),
        None => {
            kv.push((key.to_string(), value.to_string()));
            None
        }
    }
}

/// Removes `section`/`key`; returns its value.
fn remove(sections: &mut Sections, section: &str, key: &str) -> Option<String> {
    let kv = &mut sections.iter_mut().find(|(n, _)| n == section)?.1;
    let j = kv.iter().position(|(k, _)| k == key)?;
    Some(kv.remove(j).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settee.ini");
        std::fs::write(
            &path,
            "; comment\n[chttpd]\nport = 5984\n\n[admins]\nadmin = -pbkdf2:sha256-ab,cd,10\n",
        )
        .unwrap();
        let mut c = Config::load(&path).unwrap();
        assert_eq!(c.get("chttpd", "port"), Some("5984"));
        assert_eq!(c.get_or("chttpd", "port", 0u16), 5984);
        assert_eq!(
            c.set("chttpd", "port", "6000").unwrap().as_deref(),
            Some("5984")
        );
        assert_eq!(
            c.delete("admins", "admin").unwrap().as_deref(),
            Some("-pbkdf2:sha256-ab,cd,10")
        );
        let again = Config::load(&path).unwrap();
        assert_eq!(again.get("chttpd", "port"), Some("6000"));
        assert_eq!(again.get("admins", "admin"), None);
    }

    #[test]
    fn changes_in_memory_stay_out_of_the_file_until_reloaded_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settee.ini");
        std::fs::write(&path, "[log]\nlevel = info\n[uuids]\nalgorithm = random\n").unwrap();
        let mut c = Config::load(&path).unwrap();
        assert_eq!(
            c.set_unsaved("log", "level", "debug").as_deref(),
            Some("info")
        );
        assert_eq!(
            c.delete_unsaved("uuids", "algorithm").as_deref(),
            Some("random")
        );
        c.set("chttpd", "port", "6000").unwrap();
        assert_eq!(
            (c.get("log", "level"), c.get("uuids", "algorithm")),
            (Some("debug"), None)
        );
        let file = Config::load(&path).unwrap();
        assert_eq!(
            (
                file.get("log", "level"),
                file.get("uuids", "algorithm"),
                file.get("chttpd", "port")
            ),
            (Some("info"), Some("random"), Some("6000"))
        );
        // A persisted delete of a value set only in memory leaves the file as it was.
        c.set_unsaved("log", "extra", "1");
        assert_eq!(c.delete("log", "extra").unwrap().as_deref(), Some("1"));
        std::fs::write(
            &path,
            std::fs::read_to_string(&path).unwrap() + "[couchdb]\nmax_dbs_open = 7\n",
        )
        .unwrap();
        c.reload().unwrap();
        assert_eq!(
            (
                c.get("log", "level"),
                c.get("uuids", "algorithm"),
                c.get("couchdb", "max_dbs_open")
            ),
            (Some("info"), Some("random"), Some("7"))
        );
    }
}
