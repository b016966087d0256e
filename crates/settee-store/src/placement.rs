//! Which processor a store's writer thread wakes on for its next job.
//!
//! A caller that hands jobs to several stores at once (a write spread over a database's
//! shards) and then waits for them all wakes their writers while it still runs. The system
//! puts each woken thread on an idle processor if it finds one, and otherwise queues it on
//! the processor it chose: with every processor busy at that instant (the caller on one,
//! the first writer just placed on the other, on a two-processor machine), the second
//! writer is queued behind the first, and the shards are applied one after the other
//! while the caller's processor goes idle a few microseconds later. Measured on two
//! processors, the second of two shards started a median 500 µs late, a whole shard's apply.
//!
//! So the caller may steer each writer's next wake-up ([`crate::Store::place_next_job`]):
//! the last onto its own processor, which is sure to come free as soon as it waits, and the
//! others onto any but its own ([`place_fan_out`]). A steered writer takes back every
//! processor it had as soon as it wakes, so the steering lasts one wake-up.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

use crate::Store;

/// Where a writer's next wake-up should put it, relative to the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// On the caller's processor, which comes free once the caller waits.
    Here,
    /// On any processor the writer may use but the caller's.
    Elsewhere,
}

/// Steers the next jobs of `stores`, all about to be woken by the calling thread which will
/// then wait for them: the last on this processor, the others elsewhere. A store named
/// twice, or a single store, is left alone.
pub fn place_fan_out(stores: &[&Store]) {
    let Some((last, others)) = stores.split_last() else {
        return;
    };
    let others: Vec<&&Store> = others
        .iter()
        .filter(|s| !std::ptr::eq(**s, *last))
        .collect();
    if others.is_empty() {
        return;
    }
    for store in others {
        store.place_next_job(Place::Elsewhere);
    }
    last.place_next_job(Place::Here);
}

/// The processors a thread may run on.
#[derive(Clone, Copy)]
struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The calling thread's set; `None` if the system does not say.
    fn of_this_thread() -> Option<CpuSet> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, which sched_getaffinity fills
        // for the calling thread (0).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            (libc::sched_getaffinity(0, size, &mut set) == 0).then_some(CpuSet(set))
        }
    }

    fn count(&self) -> u32 {
        // SAFETY: CPU_COUNT only reads the set.
        unsafe { libc::CPU_COUNT(&self.0) as u32 }
    }

    /// Whether processor `cpu` is in the set.
    fn has(&self, cpu: usize) -> bool {
        // SAFETY: CPU_ISSET reads one bit, and `cpu` is within the set's size.
        cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }

    /// Processor `cpu` alone, which must be in this set.
    fn only(&self, cpu: usize) -> CpuSet {
        debug_assert!(self.has(cpu));
        // SAFETY: a zeroed cpu_set_t is a valid empty set; `cpu` is within its size (it is
        // in this set).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            CpuSet(set)
        }
    }

    /// This set without processor `cpu`, which must be in it.
    fn without(&self, cpu: usize) -> CpuSet {
        debug_assert!(self.has(cpu));
        let mut set = self.0;
        // SAFETY: `cpu` is within the set's size (it is in this set).
        unsafe { libc::CPU_CLR(cpu, &mut set) };
        CpuSet(set)
    }

    /// Limits thread `tid` (0: the calling thread) to this set; false if refused.
    fn apply_to(&self, tid: libc::pid_t) -> bool {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: sched_setaffinity reads the set and only changes where thread `tid` of
        // this process may run.
        unsafe { libc::sched_setaffinity(tid, size, &self.0) == 0 }
    }
}

/// The processor the calling thread runs on, if the system says.
fn this_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only reads.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// A writer thread as other threads see it, to steer its next wake-up.
#[derive(Default)]
pub(crate) struct WriterPlace {
    /// The writer thread's id; 0 before it starts and once it has stopped, when nothing is
    /// steered.
    tid: AtomicI32,
    /// The processors the writer may use, as it started.
    home: OnceLock<CpuSet>,
    /// The writer waits for work: steering applies only then, since a writer at work may
    /// take the next job without waking, and should not be moved off its processor.
    waiting: AtomicBool,
    /// The writer was steered and has not woken since.
    steered: AtomicBool,
}

impl WriterPlace {
    /// Called first on the writer thread: notes its id and processors.
    pub fn started(&self) {
        if let Some(home) = CpuSet::of_this_thread() {
            let _ = self.home.set(home);
            // SAFETY: gettid has no arguments and cannot fail.
            self.tid.store(unsafe { libc::gettid() }, Ordering::Release);
        }
    }

    /// Called last on the writer thread: its id may be given to another thread later.
    pub fn stopped(&self) {
        self.tid.store(0, Ordering::Release);
    }

    /// Steers the writer's next wake-up; false if it could not be (one processor, a writer
    /// at work or not running, or the system refused).
    pub fn steer(&self, place: Place) -> bool {
        if !self.waiting.load(Ordering::Acquire) {
            return false;
        }
        let tid = self.tid.load(Ordering::Acquire);
        let (Some(home), Some(cpu)) = (self.home.get(), this_cpu()) else {
            return false;
        };
        if tid == 0 || home.count() < 2 || !home.has(cpu) {
            return false;
        }
        let set = match place {
            Place::Here => home.only(cpu),
            Place::Elsewhere => home.without(cpu),
        };
        // Marked after the change, so that a writer that sees the mark undoes it.
        let steered = set.apply_to(tid);
        if steered {
            self.steered.store(true, Ordering::Release);
        }
        steered
    }

    /// Called on the writer thread before it waits for work.
    pub fn wait(&self) {
        self.waiting.store(true, Ordering::Release);
    }

    /// Called on the writer thread as it wakes: takes back every processor it started with
    /// if it was steered. It stays where it woke.
    pub fn settle(&self) {
        self.waiting.store(false, Ordering::Release);
        if self.steered.swap(false, Ordering::AcqRel) {
            if let Some(home) = self.home.get() {
                home.apply_to(0);
            }
        }
    }
}
