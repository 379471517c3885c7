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
        let listener = TcpListener::bind(config.address)
            .await
            .map_err(|e| ServeError::Io(format!("cannot listen on {}: {e}", config.address)))?;
        Ok(Self {
            listener,
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

    /// The names of the datasets it serves.
    pub fn dataset_names(&self) -> Vec<String> {
        self.app
            .datasets
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    }

    /// Serves until `stop` completes, then finishes the requests under way.
    pub async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let app = self.app.clone();
        let served = axum::serve(self.listener, router(self.app, crate::web::routes()))
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| ServeError::Io(e.to_string()));
        // The engines own runtimes, which may only be dropped where
        // blocking is allowed.
        let _ = tokio::task::spawn_blocking(move || drop(app)).await;
        served
    }
}

fn lock_state(config: &Config) -> Result<std::fs::File> {
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
