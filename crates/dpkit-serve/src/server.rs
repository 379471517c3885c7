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
    _lock: std::fs::File,
}

impl Server {
    /// Opens the state and every dataset, and binds `config.address` (port
    /// 0 picks a free one). Only one server may use a state directory: a
    /// second is refused, since kept answers need one writer.
    pub async fn bind(config: &Config) -> Result<Self> {
        let lock = lock_state(config)?;
        let analysts = Analysts::open(&config.state_path())?;
        let datasets = {
            let config = config.clone();
            tokio::task::spawn_blocking(move || open_all(&config))
                .await
                .map_err(|e| ServeError::Io(e.to_string()))??
        };
        let listener = listen(config.address).await?;
        let operations = match config.operations {
            Some(address) => Some(listen(address).await?),
            None => None,
        };
        Ok(Self {
            listener,
            operations,
            app: Arc::new(App::new(datasets, analysts, config.limits)?),
            _lock: lock,
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
        // a moment: the last holder drops it, so wait for the others.
        let _ = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while Arc::strong_count(&app) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            drop(app)
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

/// Holds the state directory of `config` (made if need be) for this
/// process alone: a server or a restore; refused while another holds it.
pub(crate) fn lock_state(config: &Config) -> Result<std::fs::File> {
    let file = lock_file(config, "serve.lock")?;
    file.try_lock().map_err(|_| {
        ServeError::State(format!(
            "another dpkit serve (a server or a restore) is using {} (its lock is held)",
            config.state_dir.display()
        ))
    })?;
    Ok(file)
}

/// Holds the state of `config` against a restore, while a command changes
/// or copies it (an analyst command, a backup): shared between such
/// commands, and refused while a restore runs. Kept until dropped.
pub fn share_state(config: &Config) -> Result<std::fs::File> {
    let file = lock_file(config, "restore.lock")?;
    file.try_lock_shared().map_err(|_| {
        ServeError::State(format!(
            "a restore is under way in {}",
            config.state_dir.display()
        ))
    })?;
    Ok(file)
}

/// Holds the state of `config` for a restore: refused while a command
/// holds it shared ([`share_state`]).
pub(crate) fn restore_state(config: &Config) -> Result<std::fs::File> {
    let file = lock_file(config, "restore.lock")?;
    file.try_lock().map_err(|_| {
        ServeError::State(format!(
            "another command is changing or copying {}: try again when it ends",
            config.state_dir.display()
        ))
    })?;
    Ok(file)
}

/// The lock file `name` in the state directory (made if need be).
fn lock_file(config: &Config, name: &str) -> Result<std::fs::File> {
    std::fs::create_dir_all(&config.state_dir).map_err(|e| {
        ServeError::State(format!("cannot create {}: {e}", config.state_dir.display()))
    })?;
    let path = config.state_dir.join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| ServeError::State(format!("cannot open {}: {e}", path.display())))
}
