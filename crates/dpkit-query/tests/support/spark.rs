//! A real Apache Spark for a test: a standalone cluster (a master and two
//! workers) and a Spark Connect server on loopback, from the `pyspark`
//! package (`bash .ci/install-test-tools` installs it) with Java 17; all
//! stopped when dropped. A cluster that cannot start fails the test with
//! the reason and the logs' tail, never skips it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::postgres::free_port;

pub struct Spark {
    pub folder: PathBuf,
    /// The Spark Connect port on 127.0.0.1.
    pub port: u16,
    processes: Vec<Child>,
}

/// pyspark's folder (`DPKIT_SPARK_HOME` overrides): it holds Spark's jars
/// and launchers.
fn spark_home() -> PathBuf {
    if let Ok(home) = std::env::var("DPKIT_SPARK_HOME") {
        return PathBuf::from(home);
    }
    let venv = PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/dpkit/spark-venv/lib");
    std::fs::read_dir(&venv)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/pyspark"))
        .find(|p| p.join("bin/spark-class").is_file())
        .unwrap_or_else(|| {
            panic!(
                "pyspark is not installed under {} (bash .ci/install-test-tools installs it)",
                venv.display()
            )
        })
}

/// Java 17 from Debian.
fn java_home() -> PathBuf {
    std::fs::read_dir("/usr/lib/jvm")
        .expect("Java is not installed (bash .ci/install-test-tools installs openjdk-17)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains("java-17") && p.join("bin/java").is_file())
        .min()
        .expect("no Java 17 under /usr/lib/jvm")
}

fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

impl Spark {
    /// Starts a master, two workers and a Connect server in a new folder.
    pub fn start(name: &str) -> Self {
        Self::start_with(name, &[])
    }

    /// As [`Spark::start`], with a Connect server that ends every result
    /// stream after its first response (a reattachable execution's client
    /// must reattach to read on, as it must after two minutes by default):
    /// a client that took a stream's end for the result's would read part
    /// of it.
    pub fn start_cutting_streams(name: &str) -> Self {
        Self::start_with(
            name,
            &["spark.connect.execute.reattachable.senderMaxStreamSize=1"],
        )
    }

    fn start_with(name: &str, settings: &[&str]) -> Self {
        let home = spark_home();
        let folder =
            std::env::temp_dir().join(format!("dpkit-spark-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        let mut spark = Self {
            folder,
            port: free_port(),
            processes: Vec::new(),
        };
        let master_port = free_port();
        let master = format!("spark://127.0.0.1:{master_port}");
        spark.launch(
            &home,
            "master",
            &[
                "bin/spark-class",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                &master_port.to_string(),
                "--webui-port",
                &free_port().to_string(),
            ],
        );
        spark.wait(master_port, "master");
        for worker in ["worker-1", "worker-2"] {
            let work = spark.folder.join(worker).display().to_string();
            spark.launch(
                &home,
                worker,
                &[
                    "bin/spark-class",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    "0",
                    "--work-dir",
                    &work,
                    &master,
                ],
            );
        }
        let binding = format!("spark.connect.grpc.binding.port={}", spark.port);
        let warehouse = format!(
            "spark.sql.warehouse.dir={}",
            spark.folder.join("warehouse").display()
        );
        let connect: Vec<&str> = [
            "bin/spark-submit",
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            &master,
            "--name",
            "dpkit-test",
            "--conf",
            &binding,
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.executor.memory=1g",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            &warehouse,
        ]
        .into_iter()
        .chain(settings.iter().flat_map(|s| ["--conf", s]))
        .chain(["spark-internal"])
        .collect();
        spark.launch(&home, "connect", &connect);
        spark.wait(spark.port, "connect");
        spark
    }

    fn launch(&mut self, home: &Path, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.folder.join(format!("{name}.log"))).unwrap();
        let child = Command::new(home.join(args[0]))
            .args(&args[1..])
            .env("SPARK_HOME", home)
            .env("JAVA_HOME", java_home())
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .env("SPARK_LOCAL_DIRS", &self.folder)
            .env("SPARK_LOG_DIR", &self.folder)
            .env("SPARK_WORKER_DIR", &self.folder)
            .current_dir(&self.folder)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start Spark's {name}: {e}"));
        self.processes.push(child);
    }

    /// Waits until `port` accepts connections, or fails with `name`'s log.
    fn wait(&mut self, port: u16, name: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(180) {
            if listening(port) {
                return;
            }
            if self
                .processes
                .iter_mut()
                .any(|p| p.try_wait().ok().flatten().is_some())
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let log =
            std::fs::read_to_string(self.folder.join(format!("{name}.log"))).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        panic!(
            "Spark's {name} did not start on port {port}:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    /// Kills the Connect server (the last process started) at once, as a
    /// crash would; the cluster stays up.
    pub fn stop_connect(&mut self) {
        if let Some(connect) = self.processes.last_mut() {
            let _ = connect.kill();
            let _ = connect.wait();
        }
    }

    /// The Spark Connect address.
    pub fn address(&self) -> String {
        format!("sc://127.0.0.1:{}", self.port)
    }
}

impl Drop for Spark {
    fn drop(&mut self) {
        for child in self.processes.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

impl Spark {
    /// The Python of pyspark's virtual environment.
    pub fn python(&self) -> PathBuf {
        spark_home()
            .ancestors()
            .nth(4)
            .expect("the virtual environment of pyspark")
            .join("bin/python")
    }

    /// Runs SQL statements through pyspark's own Spark Connect client (to
    /// set up tables as a user of the cluster would).
    pub fn sql(&self, statements: &[String]) {
        let python = self.python();
        let script = format!(
            "import sys\nfrom pyspark.sql import SparkSession\n\
             s = SparkSession.builder.remote('{}').getOrCreate()\n\
             s.client.disable_reattachable_execute()\n\
             for q in sys.argv[1:]:\n    s.sql(q).collect()\n",
            self.address()
        );
        let output = Command::new(&python)
            .arg("-W")
            .arg("ignore")
            .arg("-c")
            .arg(script)
            .args(statements)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
        assert!(
            output.status.success(),
            "Spark SQL failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
