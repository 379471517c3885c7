//! A real server, started in-process on a free loopback port with its own
//! state directory, and stopped when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use dpkit_serve::analysts::{Analysts, grant};
use dpkit_serve::{Config, Server};

/// The repository's data folder.
#[allow(dead_code)]
pub fn adult_description() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult/adult.toml")
}

/// A folder of its own for one test.
pub fn folder(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("dpkit-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

pub struct TestServer {
    /// Its configuration, as the server read it.
    pub config: Config,
    pub address: SocketAddr,
    /// The operators' `/health` and `/metrics`, when started with them.
    pub operations: Option<SocketAddr>,
    pub state: PathBuf,
    pub folder: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server over `descriptions` with `limits` (TOML lines).
    pub fn start(name: &str, descriptions: &[PathBuf], limits: &str) -> Self {
        Self::start_reading(name, descriptions, limits, true)
    }

    /// Starts a server as [`TestServer::start`] does, with the operators'
    /// listener on a free loopback port too.
    #[allow(dead_code)]
    pub fn start_with_operations(name: &str, descriptions: &[PathBuf], limits: &str) -> Self {
        let limits = format!("{limits}\n[operations]\naddress = \"127.0.0.1:0\"");
        Self::start_reading(name, descriptions, &limits, true)
    }

    /// Starts a server as [`TestServer::start`] does, that reads its
    /// tables from their files for each query (`in_memory = false`).
    #[allow(dead_code)]
    pub fn start_on_files(name: &str, descriptions: &[PathBuf], limits: &str) -> Self {
        Self::start_reading(name, descriptions, limits, false)
    }

    fn start_reading(name: &str, descriptions: &[PathBuf], limits: &str, memory: bool) -> Self {
        let folder = folder(name);
        let datasets: String = descriptions
            .iter()
            .map(|d| {
                format!(
                    "[[datasets]]\ndescription = {:?}\nin_memory = {memory}\n",
                    d.display().to_string()
                )
            })
            .collect();
        let text = format!(
            "address = \"127.0.0.1:0\"\nstate_dir = \"state\"\n{datasets}[limits]\n{limits}\n"
        );
        Self::start_in(Config::from_toml(&text, &folder).unwrap(), folder)
    }

    /// Stops the server, keeping its folder, and starts another on the same
    /// configuration and state.
    #[allow(dead_code)]
    pub fn restart(mut self) -> Self {
        self.stop();
        let folder = std::mem::take(&mut self.folder);
        Self::start_in(self.config.clone(), folder)
    }

    fn start_in(config: Config, folder: PathBuf) -> Self {
        let served = config.clone();
        let (ready_send, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = config.state_path();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = Server::bind(&config).await.unwrap();
                let addresses = (
                    server.address().unwrap(),
                    server.operations_address().unwrap(),
                );
                ready_send.send(addresses).unwrap();
                server
                    .serve(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let (address, operations) = ready.recv().expect("the server started");
        Self {
            config: served,
            address,
            operations,
            state,
            folder,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Adds `name` with a budget of (ε, δ) on each of `datasets`; its key.
    pub fn analyst(&self, name: &str, datasets: &[&str], epsilon: f64, delta: f64) -> String {
        let state = self.config.store();
        let key = Analysts::open(&state).unwrap().add(name).unwrap();
        for dataset in datasets {
            grant(&state, name, dataset, epsilon, delta).unwrap();
        }
        key
    }
}

impl TestServer {
    /// Stops the server (once), keeping its folder.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        if !self.folder.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.folder);
        }
    }
}
