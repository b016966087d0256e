//! The `settee` command: `settee serve` runs the server; `settee bench` measures any
//! CouchDB-compatible server on CouchDB's published workloads.

use settee_http::config::registry as setting;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use settee_http::{Config, ServerOptions, State};

mod backup;
mod logging;
mod repair;

/// Many threads allocate small, short-lived buffers per request; mimalloc's per-thread heaps
/// avoid the contention of the system allocator's arenas. It is built without transparent
/// huge pages (see the workspace manifest); on systems whose THP setting is `always`,
/// `MIMALLOC_ALLOW_THP=0` in the environment turns them off for the process too.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Makes mimalloc give back the memory it keeps for the calling thread: pages freed by a
/// thread stay with its heap until the thread allocates again, which a quiet database's
/// writer thread does not, and a server with many databases open has many such threads.
fn release_thread_memory() {
    // SAFETY: `mi_collect` takes no arguments and only takes mimalloc's own locks: it frees
    // the calling thread's unused pages and, forced, lets the process's arenas return
    // theirs to the system.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[derive(Parser)]
#[command(
    name = "settee",
    version,
    about = "A document database that speaks Apache CouchDB's HTTP API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server.
    ///
    /// Each option can also be set in the config file: `[couchdb] database_dir`,
    /// `[chttpd] bind_address`, `[chttpd] port`. Command-line values win. On the first start
    /// without an admin, SETTEE_ADMIN=user:password creates that admin; otherwise an `admin`
    /// with a random password is created and the password printed once.
    Serve {
        /// Data directory [default: ./data, or `[couchdb] database_dir`]
        #[arg(long)]
        data: Option<PathBuf>,
        /// Address to listen on [default: 127.0.0.1, or `[chttpd] bind_address`]
        #[arg(long)]
        bind: Option<String>,
        /// Port to listen on; 0 picks a free one [default: 5984, or `[chttpd] port`]
        #[arg(long)]
        port: Option<u16>,
        /// Config file [default: DATA/settee.ini]
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run CouchDB's published workloads against a server (and another, side by side).
    ///
    /// URLs may carry credentials: http://admin:password@127.0.0.1:5984. Every answer is
    /// checked; wrong answers are counted as failures and make the command fail.
    Bench(Box<BenchArgs>),
    /// Verify every record and commit checksum of a data directory's files.
    ///
    /// Reads every database's shard and view index files end to end; it takes no lock, so it
    /// may run beside a server. Exits with 1 when anything is damaged.
    Check {
        /// Data directory [default: ./data, or `[couchdb] database_dir`]
        #[arg(long)]
        data: Option<PathBuf>,
        /// Only this database.
        #[arg(long)]
        db: Option<String>,
        /// Config file [default: DATA/settee.ini]
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Back up a database of any CouchDB-compatible server to newline-delimited JSON.
    ///
    /// Every leaf revision (conflicts and deletions included) with its history and its
    /// attachments, one JSON array of documents per line after a metadata line, as
    /// `couchbackup` writes them. A backup to a file keeps FILE.log beside it; `--resume`
    /// goes on from where an interrupted one stopped.
    Backup {
        /// The server, credentials in it: http://admin:password@127.0.0.1:5984
        #[arg(long)]
        url: String,
        /// The database.
        #[arg(long)]
        db: String,
        /// The backup file [default: standard output]
        #[arg(long)]
        output: Option<PathBuf>,
        /// Go on with an interrupted backup to --output.
        #[arg(long)]
        resume: bool,
        /// Documents per line.
        #[arg(long, default_value_t = 500)]
        batch_size: usize,
    },
    /// Restore a backup (this command's or `couchbackup`'s) into a database.
    ///
    /// The database is made when it does not exist. Revisions keep their ids, so the
    /// restored database has the same documents, revisions, conflicts and deletions; a
    /// stopped restore is resumed by running it again.
    Restore {
        /// The server, credentials in it: http://admin:password@127.0.0.1:5984
        #[arg(long)]
        url: String,
        /// The database.
        #[arg(long)]
        db: String,
        /// The backup file [default: standard input]
        #[arg(long)]
        input: Option<PathBuf>,
        /// Lines written at once.
        #[arg(long, default_value_t = 4)]
        parallelism: usize,
    },
    /// Rebuild a damaged database from what can still be read, listing what was lost.
    ///
    /// Each damaged shard file is replaced by one holding every document that can still be
    /// read (the damaged file is kept beside it); damaged view indexes are deleted and built
    /// again. The server must be stopped.
    Salvage {
        /// Data directory [default: ./data, or `[couchdb] database_dir`]
        #[arg(long)]
        data: Option<PathBuf>,
        /// The database to salvage.
        #[arg(long)]
        db: String,
        /// Config file [default: DATA/settee.ini]
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    /// The server to measure.
    #[arg(long)]
    url: String,
    /// A second server to run the same workloads against, for ratios.
    #[arg(long)]
    compare: Option<String>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Runs of the workloads, the servers taking turns (with `--compare`; the first server
    /// first in odd rounds, second in even ones): each result is the median of its runs, so
    /// that a busy spell of a shared machine falls on both servers alike; failures are
    /// summed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Use the published sizes instead of the smaller defaults.
    #[arg(long)]
    published: bool,
    /// Single-document reads: concurrent keep-alive clients [default: 60; published 120].
    #[arg(long)]
    clients: Option<usize>,
    /// Single-document reads: GETs per client at least [default: 200; published 400].
    #[arg(long)]
    requests: Option<usize>,
    /// Workloads to run, comma-separated: `reads`, `views` (indexing and word count),
    /// `writes` (bulk and single-document), `fabric` (fabric_bench), `c10k`, `replication`,
    /// `mango` and `search` (the last three not in the default set).
    #[arg(
        long,
        default_value = "reads,views,writes,fabric,c10k",
        value_delimiter = ','
    )]
    workloads: Vec<String>,
    /// View indexing: score documents [default: 20,000; published 100,000].
    #[arg(long)]
    docs: Option<usize>,
    /// Replication: small documents copied [default: 10,000; published 100,000].
    #[arg(long)]
    replication_docs: Option<usize>,
    /// Mango: score documents [default: 100,000; published 1,000,000].
    #[arg(long)]
    mango_docs: Option<usize>,
    /// Search: documents of ~1 KB of text [default: 20,000; published 200,000].
    #[arg(long)]
    search_docs: Option<usize>,
    /// Search: index pairs of adjacent words too (`index_phrases`; fast exact phrases).
    #[arg(long)]
    search_index_phrases: bool,
    /// View indexing: large score documents, 0 to skip [default: 1,000; published 20,000].
    #[arg(long)]
    large_docs: Option<usize>,
    /// Word count: word documents, 0 to skip [default: 50,000; published 200,000].
    #[arg(long)]
    words: Option<usize>,
    /// Seconds each measurement of single-document reads, view builds, writes, fabric_bench's
    /// parts (its mixed load grows to it), each kind of one-shot replication (repeated into
    /// fresh targets), Mango's queries and scans, each kind of search query and each C10K
    /// step runs at least, so that a fast server is measured long enough; 0 runs the counts
    /// alone [default: 3].
    #[arg(long)]
    seconds: Option<f64>,
    /// Writes: client counts for single-document PUTs, comma-separated [default: 1,64].
    #[arg(long, value_delimiter = ',')]
    writers: Option<Vec<usize>>,
    /// fabric_bench: documents added and read at random, at least [default: 10,000; published 100,000].
    #[arg(long)]
    fabric_docs: Option<usize>,
    /// fabric_bench: single-document updates, at least [default and published: 1,000].
    #[arg(long)]
    updates: Option<usize>,
    /// fabric_bench mixed run: documents bulk-loaded, 0 to skip [default: 100,000; published 1,000,000].
    #[arg(long)]
    mixed_docs: Option<usize>,
    /// fabric_bench mixed run: concurrent readers [default and published: 15].
    #[arg(long)]
    readers: Option<usize>,
    /// C10K: concurrent connections per step, comma-separated [default and published: 1000,5000,10000].
    #[arg(long, value_delimiter = ',')]
    connections: Option<Vec<usize>>,
    /// C10K: requests per connection per step, alternating `GET /` and a document [default: 4].
    #[arg(long)]
    c10k_requests: Option<usize>,
    /// C10K: seconds a step may take before what is unfinished counts as errors [default: 120].
    #[arg(long)]
    step_seconds: Option<u64>,
}

fn main() -> ExitCode {
    logging::init();
    let result = match Cli::parse().command {
        Command::Serve {
            data,
            bind,
            port,
            config,
        } => serve(data, bind, port, config),
        Command::Bench(args) => bench(*args),
        Command::Check { data, db, config } => data_dir(data, config)
            .and_then(|dir| repair::check(&dir, db.as_deref()))
            .and_then(|ok| {
                if ok {
                    Ok(())
                } else {
                    Err("damage found".into())
                }
            }),
        Command::Salvage { data, db, config } => {
            data_dir(data, config).and_then(|dir| repair::salvage(&dir, &db))
        }
        Command::Backup {
            url,
            db,
            output,
            resume,
            batch_size,
        } => backup::backup(settee_backup::BackupOptions {
            url,
            db,
            output,
            resume,
            batch_size,
        }),
        Command::Restore {
            url,
            db,
            input,
            parallelism,
        } => backup::restore(settee_backup::RestoreOptions {
            url,
            db,
            input,
            parallelism,
        }),
    };
    logging::flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("settee: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The data directory: the command line's, else the config file's, else `./data`.
fn data_dir(data: Option<PathBuf>, config: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(dir) = data.clone().filter(|_| config.is_none()) {
        return Ok(dir);
    }
    let config_path = config.unwrap_or_else(|| {
        data.clone()
            .unwrap_or_else(|| PathBuf::from("data"))
            .join("settee.ini")
    });
    let file = Config::load(&config_path)
        .map_err(|e| format!("reading {}: {e}", config_path.display()))?;
    Ok(data
        .or_else(|| file.get("couchdb", "database_dir").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("data")))
}

/// Resolves options (command line, then config file, then defaults) and runs the server.
fn serve(
    data: Option<PathBuf>,
    bind: Option<String>,
    port: Option<u16>,
    config: Option<PathBuf>,
) -> Result<(), String> {
    let config_path = config.unwrap_or_else(|| {
        data.clone()
            .unwrap_or_else(|| PathBuf::from("data"))
            .join("settee.ini")
    });
    let file = Config::load(&config_path)
        .map_err(|e| format!("reading {}: {e}", config_path.display()))?;
    let data_dir = data
        .or_else(|| file.get("couchdb", "database_dir").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("data"));
    let bind = bind
        .or_else(|| file.get("chttpd", "bind_address").map(str::to_string))
        .unwrap_or_else(|| "127.0.0.1".into());
    let port = port.unwrap_or_else(|| file.value::<u16>(&setting::PORT));
    std::fs::create_dir_all(&data_dir)
        .map_err(|e| format!("creating {}: {e}", data_dir.display()))?;
    raise_open_files_limit();
    let threads = request_threads();
    let opts = ServerOptions {
        data_dir,
        config_path,
        release_memory: Some(release_thread_memory),
        on_config: Some(logging::apply),
        request_threads: threads,
    };
    let prepared = State::prepare(&opts, std::env::var("SETTEE_ADMIN").ok())?;
    if let Some((name, password)) = &prepared.generated_admin {
        println!("Created server admin `{name}` with password `{password}` (stored hashed in {}; shown only now).", opts.config_path.display());
    }
    let tls = file
        .value::<bool>(&setting::SSL_ENABLE)
        .then(|| -> Result<_, String> {
            let need = |key: &str| {
                file.get("ssl", key)
                    .map(str::to_string)
                    .ok_or(format!("[ssl] enable is true but [ssl] {key} is not set"))
            };
            Ok((
                settee_http::tls_acceptor(&need("cert_file")?, &need("key_file")?)?,
                file.value::<u16>(&setting::SSL_PORT),
            ))
        })
        .transpose()?;
    settee_node::smoosh::start(prepared.state.node.clone());
    // Room for documents nested as deeply as the server takes them (settee_json::deep):
    // handling one recurses about a hundred bytes a level (several times that in unoptimised
    // builds). Only the stack used is committed.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_stack_size(16 << 20)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let mut tls_server = None;
        if let Some((acceptor, tls_port)) = tls {
            let listener = tokio::net::TcpListener::bind((bind.as_str(), tls_port))
                .await
                .map_err(|e| format!("binding {bind}:{tls_port}: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            println!(
                "Settee {} serving TLS on https://{addr}",
                settee_http::VERSION
            );
            let state = prepared.state.clone();
            tls_server = Some(tokio::spawn(settee_http::serve_tls(
                listener, acceptor, state,
            )));
        }
        let listener = tokio::net::TcpListener::bind((bind.as_str(), port))
            .await
            .map_err(|e| format!("binding {bind}:{port}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        println!("Settee {} listening on http://{addr}", settee_http::VERSION);
        // Replications start once the node answers (a job may replicate to itself).
        let state = prepared.state;
        state.replicator.start();
        state.node.start_db_updates();
        tokio::select! {
            never = settee_http::serve(listener, state.clone()) => match never {},
            stop = stop_signal(&state) => stop?,
        }
        // Listeners are closed (the accept loops are gone); requests being answered finish.
        if let Some(tls) = tls_server {
            tls.abort();
        }
        if !state.shutdown(SHUTDOWN_LIMIT).await {
            tracing::warn!("connections still open after {SHUTDOWN_LIMIT:?} were cut");
        }
        println!("Settee stopped");
        Ok(())
    })
}

/// How long a stopping server lets the requests it is answering finish.
const SHUTDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits for SIGTERM or SIGINT (the server then stops); SIGHUP meanwhile reloads the
/// configuration file, as `POST /_node/_local/_config/_reload` does.
async fn stop_signal(state: &settee_http::State) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind: SignalKind| signal(kind).map_err(|e| format!("listening for signals: {e}"));
    let (mut term, mut int, mut hup) = (
        listen(SignalKind::terminate())?,
        listen(SignalKind::interrupt())?,
        listen(SignalKind::hangup())?,
    );
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => match state.reload_config() {
                Ok(()) => tracing::info!("configuration reloaded (SIGHUP)"),
                Err(e) => tracing::error!(error = %e.reason, "reloading the configuration failed"),
            },
        }
    }
    tracing::info!("stopping: no new connections; finishing the requests being answered");
    Ok(())
}

/// Runs the benchmark workloads and prints the results.
fn bench(args: BenchArgs) -> Result<(), String> {
    use settee_bench::client::Target;
    use settee_bench::report;
    use settee_bench::workloads::{c10k, fabric, mango, reads, replication, search, views, writes};
    let targets: Vec<Target> = std::iter::once(&args.url)
        .chain(args.compare.as_ref())
        .map(|u| Target::parse(u))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let wants = |w: &str| args.workloads.iter().any(|x| x == w);
    const KNOWN: [&str; 8] = [
        "reads",
        "views",
        "writes",
        "fabric",
        "c10k",
        "replication",
        "mango",
        "search",
    ];
    if let Some(unknown) = args.workloads.iter().find(|w| !KNOWN.contains(&w.as_str())) {
        return Err(format!(
            "unknown workload `{unknown}` (known: {})",
            KNOWN.join(", ")
        ));
    }
    let (r, v, f) = if args.published {
        (
            reads::Params::PUBLISHED,
            views::Params::PUBLISHED,
            fabric::Params::PUBLISHED,
        )
    } else {
        (
            reads::Params {
                clients: 60,
                requests: 200,
                seconds: 0.0,
            },
            views::Params::SMALL,
            fabric::Params::SMALL,
        )
    };
    let c = c10k::Params::published();
    let seconds = args.seconds.unwrap_or(3.0).max(0.0);
    let plan = settee_bench::Plan {
        reads: wants("reads").then(|| reads::Params {
            clients: args.clients.unwrap_or(r.clients),
            requests: args.requests.unwrap_or(r.requests),
            seconds,
        }),
        views: wants("views").then(|| views::Params {
            docs: args.docs.unwrap_or(v.docs),
            large_docs: args.large_docs.unwrap_or(v.large_docs),
            words: args.words.unwrap_or(v.words),
            seconds,
        }),
        writes: wants("writes").then(|| {
            let p = writes::Params::standard();
            writes::Params {
                seconds: seconds.max(0.01),
                clients: args.writers.clone().unwrap_or(p.clients),
                ..p
            }
        }),
        fabric: wants("fabric").then(|| fabric::Params {
            docs: args.fabric_docs.unwrap_or(f.docs),
            updates: args.updates.unwrap_or(f.updates),
            mixed_docs: args.mixed_docs.unwrap_or(f.mixed_docs),
            readers: args.readers.unwrap_or(f.readers),
            seconds,
        }),
        c10k: wants("c10k").then(|| c10k::Params {
            steps: args.connections.clone().unwrap_or(c.steps.clone()),
            requests: args.c10k_requests.unwrap_or(c.requests),
            seconds,
            step_limit: args
                .step_seconds
                .map_or(c.step_limit, std::time::Duration::from_secs),
        }),
        replication: wants("replication").then(|| {
            let p = if args.published {
                replication::Params::FULL
            } else {
                replication::Params::SMALL
            };
            replication::Params {
                docs: args.replication_docs.unwrap_or(p.docs),
                seconds,
                ..p
            }
        }),
        mango: wants("mango").then(|| {
            let p = if args.published {
                mango::Params::FULL
            } else {
                mango::Params::SMALL
            };
            mango::Params {
                docs: args.mango_docs.unwrap_or(p.docs),
                seconds,
                ..p
            }
        }),
        search: wants("search").then(|| {
            let p = if args.published {
                search::Params::FULL
            } else {
                search::Params::SMALL
            };
            search::Params {
                docs: args.search_docs.unwrap_or(p.docs),
                index_phrases: args.search_index_phrases,
                seconds,
                ..p
            }
        }),
        quiet: args.json,
    };
    raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // Each server's outcomes, round by round.
    let mut rounds: Vec<Vec<Vec<report::Outcome>>> = vec![Vec::new(); targets.len()];
    let plan = std::sync::Arc::new(plan);
    for round in 0..args.rounds {
        // Each server goes first in every other round: the one that follows the other's
        // writes may pay for their write-back.
        let mut turns: Vec<_> = targets.iter().zip(&mut rounds).collect();
        if round % 2 == 1 {
            turns.reverse();
        }
        for (target, runs) in turns {
            // Run on one of the runtime's threads, which wait on the sockets themselves: a
            // connection's answer then wakes the task that asked without a hand-off.
            let (t, p) = (target.clone(), plan.clone());
            let run = runtime.spawn(async move { settee_bench::run(&t, &p).await });
            runs.push(
                runtime
                    .block_on(run)
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("{}: {e}", target.display))?,
            );
        }
    }
    let names = (
        targets[0].display.as_str(),
        targets.get(1).map(|t| t.display.as_str()),
    );
    let compare = rounds.get(1).map(Vec::as_slice);
    if args.json {
        println!("{}", report::json_of_rounds(names, &rounds[0], compare));
    } else {
        println!("{}", report::table_of_rounds(names, &rounds[0], compare));
    }
    let failures: u64 = rounds.iter().flatten().flatten().map(|o| o.failures).sum();
    if failures > 0 {
        return Err(format!("{failures} wrong or failed answers"));
    }
    Ok(())
}

/// The threads that serve requests: `TOKIO_WORKER_THREADS` when set to a positive number
/// (as the runtime itself would read it), else one per core.
fn request_threads() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Raises the soft open-files limit to the hard limit, for many connections and databases.
#[cfg(unix)]
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Elsewhere the limit stays as it is.
#[cfg(not(unix))]
fn raise_open_files_limit() {}
