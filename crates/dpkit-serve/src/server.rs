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
        std::fs::create_dir_all(&config.state_dir).map_err(|e| {
            ServeError::State(format!("cannot create {}: {e}", config.state_dir.display()))
        })?;
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
        let _ = tokio::task::spawn_blocking(move || drop(app)).await;
        served
    }
}

async fn listen(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {address}: {e}")))
}

/// Holds the state directory of `config` for this process alone: a server
/// or a restore; refused while another holds it.
pub(crate) fn lock_state(config: &Config) -> Result<std::fs::File> {
    let path = config.state_dir.join("serve.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| ServeError::State(format!("cannot open {}: {e}", path.display())))?;
    file.try_lock().map_err(|_| {
        ServeError::State(format!(
            "another server is using {} (its lock is held)",
            config.state_dir.display()
        ))
    })?;
    Ok(file)
}
