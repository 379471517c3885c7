//! A real PostgreSQL server for a test: Debian's binaries, `initdb` and
//! `pg_ctl` in a temporary folder, listening on a free loopback port;
//! stopped and removed when dropped. A server that cannot start fails the
//! test with the reason, never skips it. As root, the server runs as the
//! `postgres` user (PostgreSQL refuses to run as root).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Postgres {
    pub folder: PathBuf,
    pub port: u16,
    bin: PathBuf,
    stopped: bool,
    /// The server's options, to start it again as it was.
    options: String,
}

/// The newest installed server's binaries (`DPKIT_PG_BIN` overrides).
fn binaries() -> PathBuf {
    if let Ok(bin) = std::env::var("DPKIT_PG_BIN") {
        return PathBuf::from(bin);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed (bash .ci/install-test-tools installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("no PostgreSQL server binaries under /usr/lib/postgresql")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a server binary, as `postgres` when we are root.
fn server_command(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(bin.join(program));
        command
    } else {
        Command::new(bin.join(program))
    }
}

fn run(mut command: Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A loopback port nothing listens on now, below the range the kernel
/// hands out for port 0 (32768–60999 on Linux). The servers the tests start
/// bind ports of their own at random (Spark's driver and executors), and one
/// of those once took the Connect server's port between its choice here and
/// its bind: the server failed and the test waited forever on its client.
/// Each process starts at its own place in 20000–31999 and never gives a
/// port twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % 500 * 24;
    for _ in 0..SPAN {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + offset) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}–{}", LOW + SPAN - 1)
}

/// Sets up `data` to accept TLS connections only, with certificates made
/// in `folder` (owned by `postgres` when we are root).
fn require_tls(folder: &Path, data: &Path) {
    authority(folder, "ca");
    authority(folder, "other");
    server_certificate(folder, "ca");
    for file in ["server.crt", "server.key"] {
        std::fs::copy(folder.join(file), data.join(file)).unwrap();
    }
    let mut settings = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .unwrap();
    std::io::Write::write_all(&mut settings, b"ssl = on\n").unwrap();
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\n\
         hostnossl all all 127.0.0.1/32 reject\n",
    )
    .unwrap();
    if is_root() {
        let mut chown = Command::new("chown");
        chown.args(["-R", "postgres:postgres"]).arg(folder);
        run(chown, "chown the server's files");
    }
    let mut key = Command::new("chmod");
    key.arg("600").arg(data.join("server.key"));
    run(key, "chmod the server's key");
}

/// Runs the `openssl` command line in `folder`.
fn openssl(folder: &Path, args: &[&str]) {
    let mut command = Command::new("openssl");
    command.args(args).current_dir(folder);
    run(command, "openssl (bash .ci/install-test-tools installs it)");
}

/// A certificate authority `name` (`name.key`, `name.pem`) in `folder`.
fn authority(folder: &Path, name: &str) {
    openssl(
        folder,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=dpkit test {name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// A server certificate for 127.0.0.1 and localhost, signed by `ca`.
fn server_certificate(folder: &Path, ca: &str) {
    openssl(
        folder,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        folder.join("names.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n",
    )
    .unwrap();
    openssl(
        folder,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "names.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// `pg_ctl start` of the server in `data`, logging to `folder`'s `log`,
/// with the server's `options`; waits until it accepts connections.
fn pg_ctl_start(bin: &Path, data: &Path, folder: &Path, options: &str) {
    let mut start = server_command(bin, "pg_ctl");
    start
        .arg("-D")
        .arg(data)
        .arg("-l")
        .arg(folder.join("log"))
        .arg("-o")
        .arg(options)
        .args(["-w", "-t", "60", "start"]);
    run(start, "pg_ctl start");
}

impl Postgres {
    /// Starts a server in a new temporary folder named after `name`.
    pub fn start(name: &str) -> Self {
        Self::start_with(name, false, false)
    }

    /// A server that keeps its commits through a crash (`fsync = on`), as
    /// a ledger's server must; the others skip it, to run faster.
    pub fn start_durable(name: &str) -> Self {
        Self::start_with(name, false, true)
    }

    /// A server that accepts TLS connections only, with a certificate for
    /// 127.0.0.1 signed by the authority in `ca.pem` (`other.pem` is an
    /// authority that did not sign it).
    pub fn start_tls_only(name: &str) -> Self {
        Self::start_with(name, true, false)
    }

    /// A server as [`Postgres::start_tls_only`] starts, that keeps its
    /// commits through a crash (`fsync = on`).
    pub fn start_durable_tls_only(name: &str) -> Self {
        Self::start_with(name, true, true)
    }

    /// The path of a certificate authority's `name.pem` (see [`Postgres::start_tls_only`]).
    pub fn authority(&self, name: &str) -> PathBuf {
        self.folder.join(format!("{name}.pem"))
    }

    fn start_with(name: &str, tls: bool, fsync: bool) -> Self {
        let bin = binaries();
        let folder = std::env::temp_dir().join(format!("dpkit-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        if is_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "postgres:postgres"]).arg(&folder);
                    c
                },
                "chown the server's folder",
            );
        }
        let data = folder.join("data");
        let mut initdb = server_command(&bin, "initdb");
        initdb.arg("-D").arg(&data).args([
            "-U",
            "dpkit",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        run(initdb, "initdb");
        if tls {
            require_tls(&folder, &data);
        }
        let port = free_port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync={}",
            folder.display(),
            if fsync { "on" } else { "off" }
        );
        pg_ctl_start(&bin, &data, &folder, &options);
        Self {
            folder,
            port,
            bin,
            stopped: false,
            options,
        }
    }

    /// The connection string of its `postgres` database.
    pub fn connection(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=dpkit dbname=postgres",
            self.port
        )
    }

    /// psql connected to the server, stopping at the first error, with
    /// `options`, before `-c`'s text.
    fn psql_command(&self, options: &[&str]) -> Command {
        let mut command = Command::new(self.bin.join("psql"));
        command
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args([
                "-U",
                "dpkit",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
            ])
            .args(options)
            .arg("-c");
        command
    }

    /// Runs SQL through psql (a client, which may run as root).
    pub fn psql(&self, sql: &str) {
        let mut command = self.psql_command(&[]);
        command.arg(sql);
        run(command, "psql");
    }

    /// The rows of the query `sql`: each value as text, `None` for NULL.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let (field, record, null) = ("\u{1f}", "\u{1e}", "\u{2}");
        let null_is = format!("null={null}");
        let options = ["-A", "-t", "-F", field, "-R", record, "-P", &null_is];
        let mut command = self.psql_command(&options);
        command.arg(sql);
        let output = command.output().expect("psql runs");
        assert!(
            output.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).expect("psql prints UTF-8");
        text.trim_end_matches('\n')
            .split(record)
            .filter(|row| !row.is_empty())
            .map(|row| {
                row.split(field)
                    .map(|value| (value != null).then(|| value.to_string()))
                    .collect()
            })
            .collect()
    }

    /// Loads `csv` (with a header row) into `table`, created by `create`.
    pub fn load_csv(&self, create: &str, table: &str, csv: &Path) {
        self.psql(create);
        let mut command = self.psql_command(&[]);
        command.arg(format!(
            "\\copy {table} FROM '{}' WITH (FORMAT csv, HEADER true)",
            csv.display()
        ));
        run(command, "psql \\copy");
    }

    /// Starts the server stopped by [`Postgres::stop`] again, on its port
    /// and data, as after a crash or a restart.
    pub fn start_again(&mut self) {
        assert!(self.stopped, "the server runs");
        pg_ctl_start(
            &self.bin,
            &self.folder.join("data"),
            &self.folder,
            &self.options,
        );
        self.stopped = false;
    }

    /// Stops the server at once (as a crash would).
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let mut stop = server_command(&self.bin, "pg_ctl");
        stop.arg("-D")
            .arg(self.folder.join("data"))
            .args(["-m", "immediate", "-w", "stop"]);
        let _ = stop.output();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}
