//! Slowing password guessing (`[chttpd_auth_lockout]`): after `threshold` failed attempts for
//! one user from one client address, every attempt from there for that user is refused for
//! `max_lifetime` after the last failure, right or wrong, without spending any time on the
//! password. Other clients, and the same user from other addresses, are not affected.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Failed attempts per (client address, user name).
#[derive(Default)]
pub struct Lockout {
    failures: Mutex<HashMap<(IpAddr, String), Failures>>,
    /// Whether any failure is remembered: the check on every request (cached credentials
    /// included) then costs one load while nobody is guessing.
    any: AtomicBool,
    /// When failures past their lifetime were last forgotten (ms), so that `any` turns off
    /// again once they have all expired.
    pruned_ms: AtomicU64,
}

struct Failures {
    count: u32,
    last_ms: u64,
}

/// The lockout settings.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Failures after which attempts are refused.
    pub threshold: u32,
    /// How long (ms) failures are remembered after the last one.
    pub lifetime_ms: u64,
    /// Most (address, user) pairs remembered.
    pub max_entries: usize,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { threshold: 5, lifetime_ms: 300_000, max_entries: 10_000 }
    }
}

impl Lockout {
    /// Whether attempts for `name` from `ip` are refused at `now_ms`.
    pub fn locked(&self, ip: IpAddr, name: &str, now_ms: u64, policy: Policy) -> bool {
        if !self.any() {
            return false;
        }
        let mut failures = self.failures.lock().expect("lockout lock");
        if now_ms >= self.pruned_ms.load(Ordering::Relaxed).saturating_add(1000) {
            failures.retain(|_, f| now_ms < f.last_ms.saturating_add(policy.lifetime_ms));
            self.pruned_ms.store(now_ms, Ordering::Relaxed);
            self.any.store(!failures.is_empty(), Ordering::Release);
        }
        failures.get(&(ip, name.to_string())).is_some_and(|f| f.count >= policy.threshold && now_ms < f.last_ms.saturating_add(policy.lifetime_ms))
    }

    /// Records a failed attempt.
    pub fn failed(&self, ip: IpAddr, name: &str, now_ms: u64, policy: Policy) {
        let mut failures = self.failures.lock().expect("lockout lock");
        if failures.len() >= policy.max_entries {
            failures.retain(|_, f| now_ms < f.last_ms.saturating_add(policy.lifetime_ms));
            if failures.len() >= policy.max_entries {
                failures.clear();
            }
        }
        let entry = failures.entry((ip, name.to_string())).or_insert(Failures { count: 0, last_ms: now_ms });
        if now_ms >= entry.last_ms.saturating_add(policy.lifetime_ms) {
            entry.count = 0;
        }
        entry.count += 1;
        entry.last_ms = now_ms;
        self.any.store(true, Ordering::Release);
    }

    /// Forgets failures after a successful attempt.
    pub fn succeeded(&self, ip: IpAddr, name: &str) {
        if !self.any() {
            return;
        }
        let mut failures = self.failures.lock().expect("lockout lock");
        failures.remove(&(ip, name.to_string()));
        self.any.store(!failures.is_empty(), Ordering::Release);
    }

    /// Whether any failed attempt is remembered.
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_one_user_from_one_address_for_a_while() {
        let l = Lockout::default();
        let p = Policy { threshold: 3, lifetime_ms: 1000, max_entries: 100 };
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for t in 0..3 {
            assert!(!l.locked(a, "ann", t, p));
            l.failed(a, "ann", t, p);
        }
        assert!(l.locked(a, "ann", 10, p));
        assert!(!l.locked(b, "ann", 10, p), "other addresses are not affected");
        assert!(!l.locked(a, "bob", 10, p), "other users are not affected");
        assert!(!l.locked(a, "ann", 1002, p), "the lock ends after the lifetime");
        l.failed(a, "ann", 1003, p);
        assert!(!l.locked(a, "ann", 1004, p), "old failures are forgotten");
        l.succeeded(a, "ann");
        assert!(!l.locked(a, "ann", 1005, p));
        l.failed(b, "cy", 2000, p);
        assert!(l.any());
        assert!(!l.locked(a, "ann", 3500, p));
        assert!(!l.any(), "failures past their lifetime are forgotten: the check is cheap again");
    }
}
