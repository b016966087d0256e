//! The `settee` command: `settee serve` runs the server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use settee_http::{Config, ServerOptions, State};

/// Many threads allocate small, short-lived buffers per request; mimalloc's per-thread heaps
/// avoid the contention of the system allocator's arenas.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "settee", version, about = "A document database that speaks Apache CouchDB's HTTP API")]
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SETTEE_LOG").unwrap_or_else(|_| "info".into())).with_writer(std::io::stderr).init();
    let Command::Serve { data, bind, port, config } = Cli::parse().command;
    match serve(data, bind, port, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("settee: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves options (command line, then config file, then defaults) and runs the server.
fn serve(data: Option<PathBuf>, bind: Option<String>, port: Option<u16>, config: Option<PathBuf>) -> Result<(), String> {
    let config_path = config.unwrap_or_else(|| data.clone().unwrap_or_else(|| PathBuf::from("data")).join("settee.ini"));
    let file = Config::load(&config_path).map_err(|e| format!("reading {}: {e}", config_path.display()))?;
    let data_dir = data.or_else(|| file.get("couchdb", "database_dir").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from("data"));
    let bind = bind.or_else(|| file.get("chttpd", "bind_address").map(str::to_string)).unwrap_or_else(|| "127.0.0.1".into());
    let port = port.unwrap_or_else(|| file.get_or("chttpd", "port", 5984));
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("creating {}: {e}", data_dir.display()))?;
    raise_open_files_limit();
    let opts = ServerOptions { data_dir, config_path };
    let prepared = State::prepare(&opts, std::env::var("SETTEE_ADMIN").ok())?;
    if let Some((name, password)) = &prepared.generated_admin {
        println!("Created server admin `{name}` with password `{password}` (stored hashed in {}; shown only now).", opts.config_path.display());
    }
    let tls = file
        .get_or("ssl", "enable", false)
        .then(|| -> Result<_, String> {
            let need = |key: &str| file.get("ssl", key).map(str::to_string).ok_or(format!("[ssl] enable is true but [ssl] {key} is not set"));
            Ok((settee_http::tls_acceptor(&need("cert_file")?, &need("key_file")?)?, file.get_or("ssl", "port", 6984u16)))
        })
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        if let Some((acceptor, tls_port)) = tls {
            let listener = tokio::net::TcpListener::bind((bind.as_str(), tls_port)).await.map_err(|e| format!("binding {bind}:{tls_port}: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            println!("Settee {} serving TLS on https://{addr}", settee_http::VERSION);
            let state = prepared.state.clone();
            tokio::spawn(async move {
                if let Err(e) = settee_http::serve_tls(listener, acceptor, state).await {
                    tracing::error!("the TLS listener failed: {e}");
                }
            });
        }
        let listener = tokio::net::TcpListener::bind((bind.as_str(), port)).await.map_err(|e| format!("binding {bind}:{port}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        println!("Settee {} listening on http://{addr}", settee_http::VERSION);
        settee_http::serve(listener, prepared.state).await.map_err(|e| e.to_string())
    })
}

/// Raises the soft open-files limit to the hard limit, for many connections and databases.
fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        let mut lim = libc_rlimit { rlim_cur: 0, rlim_max: 0 };
        if getrlimit(RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            setrlimit(RLIMIT_NOFILE, &lim);
        }
    }
}

#[repr(C)]
struct libc_rlimit {
    rlim_cur: u64,
    rlim_max: u64,
}

const RLIMIT_NOFILE: i32 = 7;

extern "C" {
    fn getrlimit(resource: i32, rlim: *mut libc_rlimit) -> i32;
    fn setrlimit(resource: i32, rlim: *const libc_rlimit) -> i32;
}
