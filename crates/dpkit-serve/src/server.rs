//! Starting and stopping the server.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::analysts::Analysts;
use crate::api::{App, router};
use crate::config::Config;
use crate::datasets::open_all;
use crate::error::{Result, ServeError};

/// A server bound to its address, ready to serve.
pub struct Server {
    listener: TcpListener,
    operations: Option<TcpListener>,
    app: Arc<App>,
}

impl Server {
    /// Opens the state and every dataset, and binds `config.address` (port
    /// 0 picks a free one). Several servers may use one state directory
    /// on one machine, and share its accounts and kept answers; a restore
    /// is refused until every one has stopped.
    pub async fn bind(config: &Config) -> Result<Self> {
        // Listening first: an app, with its engines and connections, may
        // only be dropped where blocking is allowed, never here.
        let listener = listen(config.address).await?;
        let operations = match config.operations {
            Some(address) => Some(listen(address).await?),
            None => None,
        };
        // The state and the tables are opened where blocking is allowed.
        let app = {
            let config = config.clone();
            tokio::task::spawn_blocking(move || -> Result<App> {
                let lock = serve_state(&config)?;
                let analysts = Analysts::open(&config.store())?;
                let datasets = open_all(&config)?;
                let connections = config.state_postgres.as_ref().map_or(0, |p| p.connections);
                Ok(App::new(datasets, analysts, config.limits, connections)?.holding(lock))
            })
            .await
            .map_err(|e| ServeError::Io(e.to_string()))??
        };
        Ok(Self {
            listener,
            operations,
            app: Arc::new(app),
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| ServeError::Io(e.to_string()))
    }

    /// The address of the operators' `/health` and `/metrics`, if they
    /// are served (see [`crate::operations`]).
    pub fn operations_address(&self) -> Result<Option<SocketAddr>> {
        self.operations
            .as_ref()
            .map(|l| l.local_addr().map_err(|e| ServeError::Io(e.to_string())))
            .transpose()
    }

    /// The names of the datasets it serves.
    pub fn dataset_names(&self) -> Vec<String> {
        self.app
            .datasets
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    }

    /// Serves until `stop` completes, then finishes the requests under way;
    /// the operators' listener stops with it.
    pub async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let app = self.app.clone();
        let (stopping, stopped) = tokio::sync::watch::channel(());
        let operations = self.operations.map(|listener| {
            let mut stopped = stopped.clone();
            let router = crate::operations::router(app.clone());
            tokio::spawn(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.changed().await;
                    })
                    .await
            })
        });
        let marked = app.clone();
        let stop = async move {
            stop.await;
            marked.stop_serving();
        };
        let served = axum::serve(self.listener, router(self.app, crate::web::routes()))
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| ServeError::Io(e.to_string()));
        drop(stopping);
        if let Some(operations) = operations {
            let _ = operations.await;
        }
        // The engines own runtimes, which may only be dropped where
        // blocking is allowed.
        // A connection axum has not yet dropped may still hold the app, for
        // a moment: the last holder drops it, so wait for the others. Runs
        // under way (even those whose client left) end before this returns.
        let running = app.running();
        let _ = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while Arc::strong_count(&app) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            drop(app);
            running.wait_for_none();
        })
        .await;
        served
    }
}

async fn listen(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {address}: {e}")))
}

/// Holds the state directory of `config` (made if need be) for a server:
/// shared by every server on it, refused while a restore holds it alone.
/// Servers on one state file share every account and kept answer through
/// it (see `dpkit_ledger::replay`); the file must be on a local disk.
pub(crate) fn serve_state(config: &Config) -> Result<std::fs::File> {
    hold(config, ("serve.lock", Hold::Shared), |state| {
        format!("a restore of {state} is under way: start the server when it ends")
    })
}

/// Holds the state directory of `config` for a restore, alone: refused
/// while any server uses it.
pub(crate) fn lock_state(config: &Config) -> Result<std::fs::File> {
    hold(config, ("serve.lock", Hold::Alone), |state| {
        format!("a dpkit serve is using {state} (its lock is held): stop every server on it first")
    })
}

/// Holds the state of `config` against a restore, while a command changes
/// or copies it (an analyst command, a backup): shared between such
/// commands, and refused while a restore runs. Kept until dropped.
pub fn share_state(config: &Config) -> Result<std::fs::File> {
    hold(config, ("restore.lock", Hold::Shared), |state| {
        format!("a restore is under way in {state}")
    })
}

/// Holds the state of `config` for a restore: refused while a command
/// holds it shared ([`share_state`]).
pub(crate) fn restore_state(config: &Config) -> Result<std::fs::File> {
    hold(config, ("restore.lock", Hold::Alone), |state| {
        format!("another command is changing or copying {state}: try again when it ends")
    })
}

/// How a lock file is held.
enum Hold {
    Shared,
    Alone,
}

/// Holds the lock file `name` as `how` says, or refuses with `refused`'s
/// line (given the state directory) while another holds it otherwise.
fn hold(
    config: &Config,
    (name, how): (&str, Hold),
    refused: impl FnOnce(&str) -> String,
) -> Result<std::fs::File> {
    let file = lock_file(config, name)?;
    let held = match how {
        Hold::Shared => file.try_lock_shared(),
        Hold::Alone => file.try_lock(),
    };
    held.map_err(|_| ServeError::State(refused(&config.state_dir.display().to_string())))?;
    Ok(file)
}

/// Waits for the lock file `name` in the state directory of `config` and
/// holds it alone until dropped: a turn at a one-time setup (the demo's
/// analyst) that servers started together take one after another.
pub fn take_turn(config: &Config, name: &str) -> Result<std::fs::File> {
    let file = lock_file(config, name)?;
    file.lock()
        .map_err(|e| ServeError::State(format!("cannot lock {name}: {e}")))?;
    Ok(file)
}

/// The lock file `name` in the state directory (made if need be).
fn lock_file(config: &Config, name: &str) -> Result<std::fs::File> {
    std::fs::create_dir_all(&config.state_dir).map_err(|e| {
        ServeError::State(format!("cannot create {}: {e}", config.state_dir.display()))
    })?;
    open_lock_file(&config.state_dir.join(name))
}

/// The lock file at `path`, made if need be (never emptied: its contents
/// are nothing, its lock everything).
pub(crate) fn open_lock_file(path: &std::path::Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| ServeError::State(format!("cannot open {}: {e}", path.display())))
}
