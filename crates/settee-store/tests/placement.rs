//! Steering a writer thread's next wake-up: a store steered `Here` runs its next job on the
//! caller's processor, one steered `Elsewhere` on another, and either takes back all its
//! processors once it has woken. Needs two processors; on one, steering must refuse.

use settee_store::{place_fan_out, Durability, Place, Store, StoreOptions};

/// The processor the calling thread runs on.
fn this_cpu() -> usize {
    // SAFETY: sched_getcpu only reads.
    usize::try_from(unsafe { libc::sched_getcpu() }).expect("sched_getcpu")
}

/// How many processors the calling thread may use.
fn allowed() -> usize {
    // SAFETY: a zeroed set is valid and sched_getaffinity fills it for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(libc::sched_getaffinity(0, size, &mut set), 0);
        libc::CPU_COUNT(&set) as usize
    }
}

/// Keeps the calling thread (a test's own) to processor `cpu`.
fn keep_to(cpu: usize) {
    // SAFETY: as in `allowed`; only this thread's affinity changes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(libc::sched_setaffinity(0, size, &set), 0);
    }
}

/// Steers `store`'s writer once it waits for work (it may still be finishing the last job).
fn steer(store: &Store, place: Place) {
    let started = std::time::Instant::now();
    while !store.place_next_job(place) {
        assert!(
            started.elapsed().as_secs() < 10,
            "the writer never waited for work"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Where the writer ran a job, and how many processors it could use while it did.
fn job_place(store: &Store) -> (usize, usize) {
    store
        .submit(Durability::Batch, |_txn| {
            Ok::<_, settee_store::Error>((this_cpu(), allowed()))
        })
        .wait()
        .expect("job")
}

fn store(dir: &tempfile::TempDir, name: &str) -> Store {
    Store::create(&dir.path().join(name), StoreOptions::default()).expect("create")
}

#[test]
fn a_steered_writer_wakes_where_it_was_sent_then_takes_back_its_processors() {
    let dir = tempfile::tempdir().unwrap();
    let a = store(&dir, "a");
    let cpus = allowed();
    // The writer has started once this answers.
    let (_, before) = job_place(&a);
    assert_eq!(
        before, cpus,
        "a writer may use every processor the process may"
    );
    if cpus < 2 {
        assert!(
            !a.place_next_job(Place::Here),
            "one processor: nothing to steer"
        );
        println!("skipped: steering needs two processors, this machine gives one");
        return;
    }
    let home = this_cpu();
    keep_to(home);
    for _ in 0..20 {
        steer(&a, Place::Here);
        let (cpu, allowed_then) = job_place(&a);
        assert_eq!(
            cpu, home,
            "steered here, it must wake on the caller's processor"
        );
        assert_eq!(allowed_then, cpus, "woken, it takes back every processor");
        steer(&a, Place::Elsewhere);
        let (cpu, allowed_then) = job_place(&a);
        assert_ne!(
            cpu, home,
            "steered elsewhere, it must not wake on the caller's"
        );
        assert_eq!(allowed_then, cpus);
    }
}

#[test]
fn a_fan_out_sends_the_last_writer_here_and_the_others_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (store(&dir, "a"), store(&dir, "b"));
    job_place(&a);
    job_place(&b);
    let cpus = allowed();
    if cpus < 2 {
        println!("skipped: steering needs two processors, this machine gives one");
        return;
    }
    let home = this_cpu();
    keep_to(home);
    for _ in 0..20 {
        // Both writers wait for work (steered the other way round, which the fan-out must
        // undo), so that the fan-out steers both.
        while !(a.place_next_job(Place::Here) && b.place_next_job(Place::Elsewhere)) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        place_fan_out(&[&a, &b]);
        let (first, second) = (
            a.submit(Durability::Batch, |_| {
                Ok::<_, settee_store::Error>(this_cpu())
            }),
            b.submit(Durability::Batch, |_| {
                Ok::<_, settee_store::Error>(this_cpu())
            }),
        );
        assert_ne!(
            first.wait().unwrap(),
            home,
            "the first writer goes elsewhere"
        );
        assert_eq!(second.wait().unwrap(), home, "the last comes here");
        assert_eq!(job_place(&a).1, cpus);
        assert_eq!(job_place(&b).1, cpus);
    }
}
