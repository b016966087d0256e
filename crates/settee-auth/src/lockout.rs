//! Slowing password guessing (`[chttpd_auth_lockout]`): after `threshold` failed attempts for
//! one account from one client address, every attempt from there for that account is refused
//! until `max_lifetime` has passed since the first of them, right or wrong, without spending
//! any time on the password. A success does not forget the failures, as in CouchDB. Other
//! clients, and the same account from other addresses, are not affected. The caller names the
//! account as it likes (CouchDB's key includes the account's salt, so that failures recorded
//! against a name do not lock out an account made later under it).

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
    first_ms: u64,
}

/// The lockout settings.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Failures after which attempts are refused.
    pub threshold: u32,
    /// How long (ms) failures are remembered after the first one.
    pub lifetime_ms: u64,
    /// Most (address, user) pairs remembered.
    pub max_entries: usize,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            threshold: 5,
            lifetime_ms: 300_000,
            max_entries: 10_000,
        }
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
            failures.retain(|_, f| now_ms < f.first_ms.saturating_add(policy.lifetime_ms));
            self.pruned_ms.store(now_ms, Ordering::Relaxed);
            self.any.store(!failures.is_empty(), Ordering::Release);
        }
        failures.get(&(ip, name.to_string())).is_some_and(|f| {
            f.count >= policy.threshold && now_ms < f.first_ms.saturating_add(policy.lifetime_ms)
        })
    }

    /// Records a failed attempt.
    pub fn failed(&self, ip: IpAddr, name: &str, now_ms: u64, policy: Policy) {
        let mut failures = self.failures.lock().expect("lockout lock");
        if failures.len() >= policy.max_entries {
            failures.retain(|_, f| now_ms < f.first_ms.saturating_add(policy.lifetime_ms));
            if failures.len() >= policy.max_entries {
                failures.clear();
            }
        }
        let entry = failures.entry((ip, name.to_string())).or_insert(Failures {
            count: 0,
            first_ms: now_ms,
        });
        if now_ms >= entry.first_ms.saturating_add(policy.lifetime_ms) {
            (entry.count, entry.first_ms) = (0, now_ms);
        }
        entry.count += 1;
        self.any.store(true, Ordering::Release);
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
    fn locks_one_account_from_one_address_until_a_lifetime_after_the_first_failure() {
        let l = Lockout::default();
        let p = Policy {
            threshold: 3,
            lifetime_ms: 1000,
            max_entries: 100,
        };
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for t in 0..3 {
            assert!(!l.locked(a, "ann", t * 100, p));
            l.failed(a, "ann", t * 100, p);
        }
        assert!(l.locked(a, "ann", 300, p));
        assert!(
            !l.locked(b, "ann", 300, p),
            "other addresses are not affected"
        );
        assert!(
            !l.locked(a, "bob", 300, p),
            "other accounts are not affected"
        );
        assert!(l.locked(a, "ann", 999, p));
        assert!(
            !l.locked(a, "ann", 1000, p),
            "the lock ends a lifetime after the first failure"
        );
        l.failed(a, "ann", 1003, p);
        assert!(!l.locked(a, "ann", 1004, p), "old failures are forgotten");
        l.failed(b, "cy", 2000, p);
        assert!(l.any());
        assert!(!l.locked(a, "ann", 3500, p));
        assert!(
            !l.any(),
            "failures past their lifetime are forgotten: the check is cheap again"
        );
    }
}
