//! `dpkit serve`: the curator's server, and its analysts.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use dpkit_query::{Description, Ledger};
use dpkit_serve::analysts::{Analysts, account, grant};
use dpkit_serve::{Config, Server};

use crate::write_stdout;

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
pub struct ServeArgs {
    /// The server's configuration.
    #[arg(long, value_name = "FILE", default_value = "serve.toml", global = true)]
    config: PathBuf,
    /// Also make sure an analyst named "demo" exists with the description's
    /// budget on every dataset, and print its key (kept in <state>/demo.key).
    #[arg(long)]
    demo: bool,
    /// Where to listen, instead of the configuration's `address`
    /// (127.0.0.1:8640 by default); port 0 picks a free one.
    #[arg(long, value_name = "HOST:PORT")]
    address: Option<std::net::SocketAddr>,
    /// Where to serve health and metrics, instead of the configuration's
    /// `[operations] address` (each of several servers on one state needs
    /// its own).
    #[arg(long, value_name = "HOST:PORT")]
    operations_address: Option<std::net::SocketAddr>,
    #[command(subcommand)]
    command: Option<ServeCommand>,
}

#[derive(Subcommand)]
enum ServeCommand {
    /// Manage analysts: their keys and budgets.
    Analyst {
        #[command(subcommand)]
        action: AnalystAction,
    },
    /// Copy the state (analysts, key hashes, budgets, charges, kept
    /// answers) to FILE as one consistent snapshot, while the server runs.
    Backup {
        /// The copy to write; it must not exist.
        file: PathBuf,
    },
    /// Put a backup back in place of the state, with no server running.
    /// The state it replaces is kept beside it, as state.sqlite.before-restore.
    Restore {
        /// The backup (made by `dpkit serve backup`).
        file: PathBuf,
        /// Restore even though the state changed after the backup was
        /// taken in a way it undoes: charges made since are forgotten (the
        /// answers they paid for stay released), lowered totals are raised
        /// again, and keys revoked or replaced since work again.
        #[arg(long)]
        forget_later_changes: bool,
    },
}

#[derive(Subcommand)]
enum AnalystAction {
    /// Add an analyst, grant them a dataset and print their key (shown only now).
    Add(GrantArgs),
    /// List analysts and their budgets.
    List,
    /// Revoke an analyst's key: every later request with it fails.
    Revoke {
        /// The analyst.
        name: String,
    },
    /// Give an analyst a new key (printed, shown only now), revoked or not:
    /// the old key fails from the next request on; budgets stay as they are.
    Rekey {
        /// The analyst.
        name: String,
    },
    /// Grant a dataset, or raise or lower a budget (what was spent stays spent).
    Budget(GrantArgs),
}

#[derive(Parser)]
#[command(allow_negative_numbers = true)]
struct GrantArgs {
    /// The analyst.
    name: String,
    /// The dataset (its description's table name).
    #[arg(long)]
    dataset: String,
    /// Total ε (default: the analyst's current total on the dataset, or the
    /// description's [budget] for a new analyst).
    #[arg(long)]
    epsilon: Option<f64>,
    /// Total δ (default: the analyst's current total on the dataset, or the
    /// description's [budget] for a new analyst).
    #[arg(long)]
    delta: Option<f64>,
}

/// Runs `dpkit serve`.
pub fn serve(args: &ServeArgs) -> Result<()> {
    if !args.config.exists() {
        bail!(
            "cannot read {}: no such file; give the server's configuration with --config FILE \
             (dpkit's repository has data/adult/serve.toml for the demo)",
            args.config.display()
        );
    }
    let config =
        Config::load(&args.config)?.with_addresses(args.address, args.operations_address)?;
    match &args.command {
        Some(ServeCommand::Analyst { action }) => analyst(&config, action),
        Some(ServeCommand::Backup { file }) => {
            let copied = dpkit_serve::backup::backup(&config, file)?;
            write_stdout(&format!(
                "backed up the state as it was at {}: {} analyst(s), {} account(s), {} charge(s), to {}\n",
                copied.ledger.taken,
                copied.analysts,
                copied.ledger.accounts,
                copied.ledger.charges,
                file.display()
            ))
        }
        Some(ServeCommand::Restore {
            file,
            forget_later_changes,
        }) => restore(&config, file, *forget_later_changes),
        None => run(&config, args.demo),
    }
}

fn run(config: &Config, demo: bool) -> Result<()> {
    if demo {
        let key = demo_key(config)?;
        write_stdout(&format!(
            "demo analyst's key (also in {}): {key}\n",
            demo_key_path(config).display()
        ))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime.block_on(async {
        let server = Server::bind(config).await?;
        let address = server.address()?;
        let operations = match server.operations_address()? {
            Some(at) => {
                if !at.ip().is_loopback() {
                    crate::query::note(&format!(
                        "/health and /metrics take no key and show every analyst's budget: \
                         keep {at} where only operators reach"
                    ));
                }
                format!("; /health and /metrics on http://{at}/")
            }
            None => String::new(),
        };
        write_stdout(&format!(
            "dpkit serve: http://{address}/ (datasets: {}){operations}; Ctrl-C stops it\n",
            server.dataset_names().join(", ")
        ))?;
        server.serve(stopped()).await?;
        Ok(())
    })
}

fn restore(config: &Config, file: &Path, forget: bool) -> Result<()> {
    let how = match forget {
        true => dpkit_ledger::Restore::ForgetLaterChanges,
        false => dpkit_ledger::Restore::KeepLaterChanges,
    };
    let restored = dpkit_serve::backup::restore(config, file, how).map_err(|e| match e {
        dpkit_serve::ServeError::Ledger(dpkit_ledger::LedgerError::Budget(reason)) => {
            anyhow::anyhow!("{reason}: add --forget-later-changes to restore it all the same")
        }
        other => other.into(),
    })?;
    write_stdout(&format!(
        "restored the state as it was at {}: {} analyst(s), {} account(s), {} charge(s)\n",
        restored.ledger.taken, restored.analysts, restored.ledger.accounts, restored.ledger.charges
    ))
}

/// Completes on Ctrl-C or SIGTERM.
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

fn demo_key_path(config: &Config) -> PathBuf {
    config.state_dir.join("demo.key")
}

/// The demo analyst's key, made (with every dataset granted) the first time.
/// Several servers started at once on one state make it once: each waits
/// for the others' turn (`demo.lock`), and none runs beside a restore.
fn demo_key(config: &Config) -> Result<String> {
    let _restore = dpkit_serve::server::share_state(config)?;
    let _turn = dpkit_serve::server::take_turn(config, "demo.lock")?;
    let path = demo_key_path(config);
    let analysts = Analysts::open(&config.store())?;
    if analysts.exists("demo")? {
        return std::fs::read_to_string(&path)
            .map(|key| key.trim().to_string())
            .with_context(|| {
                format!(
                    "the demo analyst exists but {} cannot be read",
                    path.display()
                )
            });
    }
    let key = analysts.add("demo")?;
    write_private(&path, &key)?;
    for entry in &config.datasets {
        let description = Description::load(&entry.description)?;
        grant(
            &config.store(),
            "demo",
            &entry.served_name(&description),
            description.budget_epsilon,
            description.budget_delta,
        )?;
    }
    Ok(key)
}

/// Writes `text` to a file only its owner can read.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

fn analyst(config: &Config, action: &AnalystAction) -> Result<()> {
    let _shared = dpkit_serve::server::share_state(config)?;
    let analysts = Analysts::open(&config.store())?;
    match action {
        AnalystAction::Add(args) => {
            let description = dataset(config, &args.dataset)?;
            let key = analysts.add(&args.name)?;
            set_budget(config, args, &description)?;
            write_stdout(&format!(
                "{key}\n(the key of analyst {}: it is shown only now, and only its hash is kept)\n",
                args.name
            ))
        }
        AnalystAction::Budget(args) => {
            if !analysts.exists(&args.name)? {
                bail!("no analyst is named {}", args.name);
            }
            let description = dataset(config, &args.dataset)?;
            set_budget(config, args, &description)?;
            list(config, &analysts)
        }
        AnalystAction::Revoke { name } => {
            analysts.revoke(name)?;
            write_stdout(&format!("revoked the key of {name}\n"))
        }
        AnalystAction::Rekey { name } => {
            let key = analysts.rekey(name)?;
            write_stdout(&format!(
                "{key}\n(the new key of analyst {name}: it is shown only now, and only its hash \
                 is kept; the old key no longer works)\n"
            ))
        }
        AnalystAction::List => list(config, &analysts),
    }
}

/// The served dataset `name` (its `name` in the configuration, else its
/// description's main table's), or a refusal that lists the names there are.
fn dataset(config: &Config, name: &str) -> Result<Description> {
    let mut names = Vec::with_capacity(config.datasets.len());
    for entry in &config.datasets {
        let description = Description::load(&entry.description)?;
        let served = entry.served_name(&description);
        if served == name {
            return Ok(description);
        }
        names.push(served);
    }
    bail!(
        "no dataset named {name} in the configuration: its datasets are {} (each is named by \
         its `name` in the configuration, else by its description's [table] name)",
        names.join(", ")
    )
}

/// Grants the analyst's totals on the dataset: each as given, or else as
/// the analyst has them already, or else the description's `[budget]`.
fn set_budget(config: &Config, args: &GrantArgs, description: &Description) -> Result<()> {
    let account = account(&args.name, &args.dataset);
    let (epsilon, delta) = match Ledger::account_state_in(&config.store(), &account)? {
        Some(state) => (state.total_epsilon, state.total_delta),
        None => (description.budget_epsilon, description.budget_delta),
    };
    let epsilon = args.epsilon.unwrap_or(epsilon);
    let delta = args.delta.unwrap_or(delta);
    Ok(grant(
        &config.store(),
        &args.name,
        &args.dataset,
        epsilon,
        delta,
    )?)
}

fn list(config: &Config, analysts: &Analysts) -> Result<()> {
    let mut text = String::new();
    for row in analysts.list()? {
        let status = row
            .revoked
            .map_or("live".to_string(), |at| format!("revoked {at}"));
        text.push_str(&format!(
            "{} (key made {}, {status})\n",
            row.name, row.created
        ));
        for entry in &config.datasets {
            let table = entry.served_name(&Description::load(&entry.description)?);
            let account = account(&row.name, &table);
            if let Some(state) = Ledger::account_state_in(&config.store(), &account)? {
                text.push_str(&format!(
                    "  {table}: spent ε = {} of {}, δ = {:e} of {:e}, {} queries\n",
                    dpkit_ledger::shown_epsilon(state.spent_epsilon),
                    state.total_epsilon,
                    state.spent_delta,
                    state.total_delta,
                    state.queries
                ));
            }
        }
    }
    if text.is_empty() {
        text.push_str("no analysts yet: dpkit serve analyst add NAME --dataset D\n");
    }
    write_stdout(&text)
}
