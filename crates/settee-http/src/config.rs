//! The INI configuration file, with CouchDB's section and key names, readable and writable
//! at runtime (`/_node/_local/_config`) and persisted on every change.

use std::path::{Path, PathBuf};

/// Sections of `key = value` lines, in file order.
#[derive(Clone, Debug, Default)]
pub struct Config {
    path: PathBuf,
    sections: Vec<(String, Vec<(String, String)>)>,
}

impl Config {
    /// Reads `path`; a missing file is an empty configuration that will be created there.
    pub fn load(path: &Path) -> std::io::Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut config = Config { path: path.to_path_buf(), sections: Vec::new() };
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
                config.put(&section, k.trim(), v.trim());
            }
        }
        Ok(config)
    }

    /// The file this configuration lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A value.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.section(section)?.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A value parsed, or `default` when absent or unparsable.
    pub fn get_or<T: std::str::FromStr>(&self, section: &str, key: &str, default: T) -> T {
        self.get(section, key).and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    /// The keys and values of one section.
    pub fn section(&self, name: &str) -> Option<&[(String, String)]> {
        self.sections.iter().find(|(n, _)| n == name).map(|(_, kv)| kv.as_slice())
    }

    /// Every section.
    pub fn sections(&self) -> &[(String, Vec<(String, String)>)] {
        &self.sections
    }

    fn put(&mut self, section: &str, key: &str, value: &str) -> Option<String> {
        let kv = match self.sections.iter_mut().position(|(n, _)| n == section) {
            Some(i) => &mut self.sections[i].1,
            None => {
                self.sections.push((section.to_string(), Vec::new()));
                &mut self.sections.last_mut().expect("just pushed").1
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

    /// Sets a value and writes the file; returns the old value.
    pub fn set(&mut self, section: &str, key: &str, value: &str) -> std::io::Result<Option<String>> {
        let old = self.put(section, key, value);
        self.save()?;
        Ok(old)
    }

    /// Removes a value and writes the file; returns the old value.
    pub fn delete(&mut self, section: &str, key: &str) -> std::io::Result<Option<String>> {
        let Some(i) = self.sections.iter().position(|(n, _)| n == section) else { return Ok(None) };
        let kv = &mut self.sections[i].1;
        let Some(j) = kv.iter().position(|(k, _)| k == key) else { return Ok(None) };
        let (_, old) = kv.remove(j);
        self.save()?;
        Ok(Some(old))
    }

    /// Writes the file atomically (a new file renamed over the old one).
    pub fn save(&self) -> std::io::Result<()> {
        let mut text = String::new();
        for (name, kv) in &self.sections {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settee.ini");
        std::fs::write(&path, "; comment\n[chttpd]\nport = 5984\n\n[admins]\nadmin = -pbkdf2:sha256-ab,cd,10\n").unwrap();
        let mut c = Config::load(&path).unwrap();
        assert_eq!(c.get("chttpd", "port"), Some("5984"));
        assert_eq!(c.get_or("chttpd", "port", 0u16), 5984);
        assert_eq!(c.set("chttpd", "port", "6000").unwrap().as_deref(), Some("5984"));
        assert_eq!(c.delete("admins", "admin").unwrap().as_deref(), Some("-pbkdf2:sha256-ab,cd,10"));
        let again = Config::load(&path).unwrap();
        assert_eq!(again.get("chttpd", "port"), Some("6000"));
        assert_eq!(again.get("admins", "admin"), None);
    }
}
