//! Ledgers in a real PostgreSQL server, started by each test on loopback:
//! the same steps give the same outcomes as in a SQLite file, and charges
//! racing from many connections and two writers (two processes' worth)
//! spend exactly the budget.

use dpkit_core::accounting::{Cost, PrivacyLoss};
use dpkit_core::mechanism::DiscreteGaussian;
use dpkit_ledger::{Analysts, GroupCommit, Ledger, LedgerError, Once, RequestTurns, Store};

/// The test servers of dpkit-query's tests, shared.
#[path = "../../dpkit-query/tests/support/postgres.rs"]
mod server;

use server::Postgres;

fn pure(epsilon: f64) -> Cost {
    PrivacyLoss::pure(epsilon).unwrap().into()
}

/// A Gaussian count's cost, which the concentrated accountant counts.
fn gaussian() -> Cost {
    let count = DiscreteGaussian::new(0.05, 1e-8, 1).unwrap();
    Cost {
        loss: PrivacyLoss::approximate(0.05, 1e-8).unwrap(),
        concentrated: Some(count.concentrated(1).unwrap()),
    }
}

/// Grants, charges, refunds and replays on `store`, and what each step
/// gave, as text.
fn steps(store: &Store) -> Vec<String> {
    let mut seen = Vec::new();
    let mut see = |what: String| seen.push(what);
    see(format!(
        "{:?}",
        Ledger::open_account_in(store, "ann/adult").map(|_| ())
    ));
    Ledger::grant_in(store, "ann/adult", 1.0, 1e-6).unwrap();
    Ledger::grant_in(store, "bob/adult", 0.5, 0.0).unwrap();
    let ann = Ledger::open_account_in(store, "ann/adult").unwrap();
    let first = ann.charge(pure(0.25), "q1").unwrap();
    see(format!("{:?}", ann.charge(pure(0.5), "q2").map(|_| ())));
    see(format!("{:?}", ann.charge(pure(0.5), "q3").map(|_| ())));
    see(format!("{:?}", ann.refund(first)));
    see(format!("{:?}", ann.refund(first)));
    let Once::Charged(charge) = ann.charge_once(pure(0.125), "q4", "r4").unwrap() else {
        panic!("a new request is charged");
    };
    see(format!("{:?}", ann.charge_once(pure(0.125), "q4", "r4")));
    see(format!("{:?}", ann.keep_answer(charge, "the answer")));
    see(format!("{:?}", ann.keep_answer(charge, "another")));
    see(format!("{:?}", ann.charge_once(pure(0.125), "q4", "r4")));
    see(format!("{:?}", ann.replayed("r4")));
    see(format!("{:?}", ann.refund(charge)));
    let admitted = (0..400).take_while(|_| ann.charge(gaussian(), "g").is_ok());
    see(format!("{} Gaussian counts", admitted.count()));
    see(format!("{:?}", ann.how_many_more(pure(0.01))));
    Ledger::grant_in(store, "ann/adult", 3.0, 1e-6).unwrap();
    see(format!("{:?}", ann.how_many_more(pure(0.01))));
    let bob = Ledger::open_account_in(store, "bob/adult").unwrap();
    see(format!(
        "{:?}",
        bob.charge(pure(0.75), "too much").map(|_| ())
    ));
    let analysts = Analysts::open(store).unwrap();
    for (name, hash) in [("ann", "h1"), ("bob", "h2"), ("ann", "h3")] {
        see(format!("add {name}: {:?}", analysts.add(name, hash)));
    }
    see(format!("{:?}", analysts.revoke("ann")));
    see(format!("{:?}", analysts.revoke("ann")));
    see(format!(
        "{:?} {:?}",
        analysts.named_by("h1"),
        analysts.named_by("h2")
    ));
    see(format!("{:?}", analysts.rekey("ann", "h4")));
    see(format!("{:?}", analysts.rekey("carl", "h5")));
    see(format!(
        "{:?} {:?}",
        analysts.named_by("h4"),
        analysts.exists("carl")
    ));
    let listed = analysts.list().unwrap();
    see(format!(
        "{:?}",
        listed
            .iter()
            .map(|a| (&a.name, a.revoked.is_some()))
            .collect::<Vec<_>>()
    ));
    assert!(
        listed
            .iter()
            .all(|a| a.created.len() == "2026-11-29T04:30:00Z".len())
    );
    // An account of Gaussian counts alone, kept by the concentrated accountant.
    Ledger::grant_in(store, "carl/adult", 1.0, 1e-6).unwrap();
    let carl = Ledger::open_account_in(store, "carl/adult").unwrap();
    let admitted = (0..400).take_while(|_| carl.charge(gaussian(), "g").is_ok());
    see(format!("{} Gaussian counts", admitted.count()));
    see(format!(
        "{:?}",
        Ledger::reader_in(store).unwrap().every_account()
    ));
    seen
}

#[test]
fn a_ledger_in_postgresql_gives_what_a_ledger_in_a_file_gives() {
    let server = Postgres::start_durable("ledger-steps");
    let folder = std::env::temp_dir().join(format!("dpkit-ledger-steps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let file = Store::file(&folder.join("state.sqlite"));
    let (in_file, in_postgres) = (steps(&file), steps(&Store::Postgres(server.connection())));
    for (a, b) in in_file.iter().zip(&in_postgres) {
        // The refusal names the store: a file's path, or PostgreSQL.
        assert_eq!(
            a.replace(&file.to_string(), "STORE"),
            b.replace("PostgreSQL", "STORE")
        );
    }
    assert_eq!(in_file.len(), in_postgres.len());
    assert!(
        in_postgres[0].contains("no budget has been granted"),
        "{}",
        in_postgres[0]
    );
    assert!(
        in_postgres
            .iter()
            .any(|s| s.contains("Answered(\"the answer\")"))
    );
    let accounts = in_postgres.last().unwrap();
    assert!(accounts.contains("spent_rho"), "{accounts}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn charges_racing_from_two_writers_and_many_connections_spend_exactly_the_budget() {
    let server = Postgres::start_durable("ledger-race");
    // Whatever the server's default isolation, writes say their own.
    server.psql("ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    // Two writers, as two processes would have, and plain connections,
    // each charging until refused, all from the same moment on.
    let writers = [
        GroupCommit::open_in(&store).unwrap(),
        GroupCommit::open_in(&store).unwrap(),
    ];
    let start = std::sync::Arc::new(std::sync::Barrier::new(24));
    let threads: Vec<_> = (0..24)
        .map(|i| {
            let ledger = match i % 3 {
                2 => Ledger::open_account_in(&store, "ann/adult").unwrap(),
                w => writers[w].open_account("ann/adult").unwrap(),
            };
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut charged = 0;
                loop {
                    match ledger.charge(pure(0.01), "q") {
                        Ok(_) => charged += 1,
                        Err(LedgerError::Budget(_)) => return charged,
                        Err(other) => panic!("{other}"),
                    }
                }
            })
        })
        .collect();
    let charged: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(charged, 100);
    let state = Ledger::open_account_in(&store, "ann/adult")
        .unwrap()
        .state()
        .unwrap();
    assert_eq!((state.queries, state.spent_epsilon), (100, 1.0));
    let groups: u64 = writers
        .iter()
        .map(|w| w.counts().groups.load(std::sync::atomic::Ordering::SeqCst))
        .sum();
    assert!(groups > 0);
}

#[test]
fn a_ledger_reaches_a_server_that_takes_only_tls_as_its_sslmode_says() {
    let server = Postgres::start_durable_tls_only("ledger-tls");
    let with = |settings: String| Store::Postgres(format!("{} {settings}", server.connection()));
    let signed_by = |name: &str| {
        let root = server.authority(name);
        with(format!(
            "sslmode=verify-full sslrootcert={}",
            root.display()
        ))
    };
    let store = signed_by("ca");
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    let ledger = Ledger::open_account_in(&store, "ann/adult").unwrap();
    ledger.charge(pure(0.5), "q").unwrap();
    assert_eq!(ledger.state().unwrap().spent_epsilon, 0.5);
    let refusals = [
        (with("sslmode=disable".into()), "no encryption"),
        (signed_by("other"), "invalid peer certificate"),
    ];
    for (store, why) in refusals {
        let error = Ledger::reader_in(&store).err().unwrap().to_string();
        assert!(
            error.starts_with("ledger PostgreSQL: ") && error.contains(why),
            "{error}"
        );
    }
}

#[test]
fn servers_opening_a_new_database_at_once_make_its_tables_once() {
    let server = Postgres::start_durable("ledger-fresh");
    let store = Store::Postgres(server.connection());
    let start = std::sync::Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                match i % 2 {
                    0 => Analysts::open(&store).map(drop),
                    _ => Ledger::reader_in(&store).map(drop),
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap().unwrap();
    }
}

#[test]
fn a_role_that_may_not_create_tables_uses_a_ledger_made_by_its_owner() {
    let server = Postgres::start_durable("ledger-role");
    let owner = Store::Postgres(server.connection());
    Ledger::grant_in(&owner, "ann/adult", 1.0, 0.0).unwrap();
    Analysts::open(&owner).unwrap();
    // What a curator grants the role its servers connect as.
    server.psql(
        "CREATE ROLE served LOGIN;
         REVOKE CREATE ON SCHEMA public FROM PUBLIC;
         GRANT SELECT, INSERT, UPDATE, DELETE ON accounts, spends, replays, analysts TO served;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO served;",
    );
    let served = Store::Postgres(server.connection().replace("user=dpkit", "user=served"));
    let ledger = Ledger::open_account_in(&served, "ann/adult").unwrap();
    ledger.charge(pure(0.5), "q").unwrap();
    assert!(Analysts::open(&served).unwrap().add("ann", "h").unwrap());
    assert_eq!(ledger.state().unwrap().spent_epsilon, 0.5);
}

/// A new request of `ledger`'s, charged.
fn charged(ledger: &Ledger, request: &str) -> dpkit_ledger::Charge {
    match ledger.charge_once(pure(0.25), "q", request).unwrap() {
        Once::Charged(charge) => charge,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_request_runs_once_at_a_time_across_processes_and_a_lost_turn_keeps_nothing() {
    let server = Postgres::start_durable("ledger-turns");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    // Two processes' turns.
    let (here, there) = (
        RequestTurns::open(&store).unwrap(),
        RequestTurns::open(&store).unwrap(),
    );
    let turn = here.try_take(7).unwrap().expect("a free turn");
    assert!(here.try_take(7).unwrap().is_none(), "in the same process");
    assert!(there.try_take(7).unwrap().is_none(), "in another process");
    assert!(there.try_take(-7).unwrap().is_some(), "another request's");
    // A run keeps its answer while it holds its turn, which then goes.
    let ledger = Ledger::open_account_in(&store, "ann/adult").unwrap();
    let charge = charged(&ledger, "r7");
    ledger.keep_answers_holding(Some(&turn));
    assert_eq!(ledger.keep_answer(charge, "kept").unwrap(), None);
    drop(turn);
    assert!(there.try_take(7).unwrap().is_some(), "given back");
    // A turn whose session ended keeps nothing; its charge is given back.
    let turn = here.try_take(1 << 40 | 9).unwrap().expect("a free turn");
    let charge = charged(&ledger, "r9");
    ledger.keep_answers_holding(Some(&turn));
    server.psql(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
         WHERE locktype = 'advisory' AND classid = 256 AND objid = 9",
    );
    let taken = there.try_take(1 << 40 | 9).unwrap();
    assert!(taken.is_some(), "the turn went with its session");
    let kept = ledger.keep_answer(charge, "not kept");
    assert!(matches!(kept, Err(LedgerError::GivenBack(_))), "{kept:?}");
    // Nothing was kept, and the charge stays for the request asked again.
    assert_eq!(ledger.replayed("r9").unwrap(), None);
    let again = ledger.charge_once(pure(0.25), "q", "r9").unwrap();
    assert_eq!(again, Once::Unanswered(charge));
    let state = ledger.state().unwrap();
    assert_eq!((state.spent_epsilon, state.queries), (0.5, 2));
    // The process goes on, on a new session; a negative key is a key too.
    drop(turn);
    let turn = here.try_take(-11).unwrap().expect("a free turn");
    let charge = charged(&ledger, "r-11");
    ledger.keep_answers_holding(Some(&turn));
    assert_eq!(ledger.keep_answer(charge, "kept").unwrap(), None);
}

/// Issue 63: a run whose turn could not be let go (here its unlock is
/// refused, as a transient failure would fail it) sends new turns to a new
/// session, and the other runs of its process keep theirs: they still keep
/// their answers, and no other process can take their requests. Before, the
/// session was replaced at the next take, and its other turns went with it.
#[test]
fn a_turn_that_cannot_be_let_go_takes_no_other_runs_turn_along() {
    let server = Postgres::start_durable("ledger-turn-stuck");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    // The process's turns, as a role that PostgreSQL's grants apply to.
    server.psql(
        "CREATE ROLE turned LOGIN;
         GRANT SELECT, INSERT, UPDATE, DELETE ON accounts, spends, replays, analysts TO turned;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO turned;",
    );
    let turned = Store::Postgres(server.connection().replace("user=dpkit", "user=turned"));
    let (here, there) = (
        RequestTurns::open(&turned).unwrap(),
        RequestTurns::open(&store).unwrap(),
    );
    let (stuck, other) = (here.try_take(1).unwrap(), here.try_take(2).unwrap());
    let other = other.expect("a free turn");
    server.psql("REVOKE EXECUTE ON FUNCTION pg_advisory_unlock(bigint) FROM PUBLIC;");
    drop(stuck);
    server.psql("GRANT EXECUTE ON FUNCTION pg_advisory_unlock(bigint) TO PUBLIC;");
    // A new take goes to a new session...
    let third = here.try_take(3).unwrap().expect("a free turn");
    // ...and the run under `other` keeps its turn and its answer.
    assert!(
        there.try_take(2).unwrap().is_none(),
        "another process took it"
    );
    let ledger = Ledger::open_account_in(&store, "ann/adult").unwrap();
    let charge = charged(&ledger, "r2");
    ledger.keep_answers_holding(Some(&other));
    assert_eq!(ledger.keep_answer(charge, "kept").unwrap(), None);
    ledger.keep_answers_holding(None);
    // The key that was not let go stays held until the old session ends,
    // with the last turn taken on it.
    assert!(there.try_take(1).unwrap().is_none());
    drop(other);
    let freed = (0..100).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        there.try_take(1).unwrap()
    });
    assert!(freed.is_some(), "the old session ended with its last turn");
    drop(third);
}

#[test]
fn a_store_never_shows_its_connection_string() {
    let secret = "host=127.0.0.1 port=1 user=dpkit password=hunter2secret connect_timeout=2";
    let store = Store::Postgres(secret.into());
    assert_eq!(format!("{store} {store:?}"), "PostgreSQL Postgres(..)");
    let refused = Ledger::open_account_in(&store, "ann/adult").err().unwrap();
    assert!(!refused.to_string().contains("hunter2"), "{refused}");
    let garbled = Store::Postgres("host=127.0.0.1 password=hunter2secret port=x".into());
    let refused = Ledger::reader_in(&garbled).err().unwrap().to_string();
    assert!(
        refused.contains("does not parse") && !refused.contains("hunter2"),
        "{refused}"
    );
}

#[test]
fn a_server_that_may_lose_commits_is_refused() {
    let server = Postgres::start("ledger-fsync-off");
    let refused = Ledger::reader_in(&Store::Postgres(server.connection()))
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("fsync = off"), "{refused}");
}

/// Ends every session on `server` but psql's own, as a restart or a
/// failover of the server would, waiting for each to end.
fn end_every_session(server: &Postgres) {
    server.psql(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
}

/// A server that ends its sessions (a restart, a failover) leaves a
/// process's writer and analysts able to go on: each connection is seen
/// closed without another statement sent on it, and the writer replaces
/// its own before its next group, which commits.
#[test]
fn connections_the_server_ended_are_seen_closed_and_the_writer_replaces_its_own() {
    let server = Postgres::start_durable("ledger-ended-sessions");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    let writer = GroupCommit::open_in(&store).unwrap();
    let ledger = writer.open_account("ann/adult").unwrap();
    let analysts = Analysts::open(&store).unwrap();
    ledger.charge(pure(0.25), "before").unwrap();
    assert!(!ledger.is_closed() && !analysts.is_closed());
    end_every_session(&server);
    // Time for the server's word to arrive; then one look each.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(ledger.is_closed(), "the ledger's session ended");
    assert!(analysts.is_closed(), "the analysts' session ended");
    // The writer's group goes on a new connection.
    ledger.charge(pure(0.25), "after").unwrap();
    let fresh = Ledger::open_account_in(&store, "ann/adult").unwrap();
    assert_eq!(fresh.state().unwrap().spent_epsilon, 0.5);
}

/// A ledger in PostgreSQL is refused when edited by hand, as a file is,
/// whatever psql does; one of layout 3 (before the chained digest) is
/// upgraded once, its chains computed over the charges it holds.
#[test]
fn a_ledger_in_postgresql_of_layout_three_is_upgraded_and_refused_once_edited() {
    let server = Postgres::start_durable("ledger-edited");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
    let ann = Ledger::open_account_in(&store, "ann/adult").unwrap();
    let charges: Vec<_> = (0..5)
        .map(|i| ann.charge(pure(0.1), &format!("q{i}")).unwrap())
        .collect();
    ann.refund(charges[1]).unwrap();
    drop(ann);
    // Back to layout 3: no chain, the older constraint.
    server.psql(
        "ALTER TABLE accounts DROP COLUMN links, DROP COLUMN head, DROP COLUMN seal;
         ALTER TABLE spends DROP COLUMN chained, DROP COLUMN link, DROP COLUMN refund_chained,
             DROP COLUMN refund_link, DROP CONSTRAINT charges_of_this_layout;
         ALTER TABLE spends ADD CONSTRAINT charges_of_this_layout CHECK (layout >= 3);
         DROP INDEX spends_by_account;",
    );
    let ann = Ledger::open_account_in(&store, "ann/adult").unwrap();
    let state = ann.state().unwrap();
    assert_eq!((state.queries, state.spent_epsilon), (4, 0.4));
    ann.charge(pure(0.1), "after the upgrade").unwrap();
    // A total raised by hand: the next charge is refused, and a total put
    // back as it was verifies again.
    server.psql("UPDATE accounts SET epsilon_units = 100000000000000000");
    let refused = ann.charge(pure(0.1), "q").unwrap_err().to_string();
    assert!(
        refused.starts_with("ledger PostgreSQL: account 'ann/adult' does not verify")
            && refused.contains("restore the ledger from a backup"),
        "{refused}"
    );
    server.psql("UPDATE accounts SET epsilon_units = 1000000000000000");
    ann.charge(pure(0.1), "q").unwrap();
    // A charge's ε edited: the account is refused when opened.
    server.psql("UPDATE spends SET epsilon_units = 1 WHERE query = 'q0'");
    let refused = Ledger::open_account_in(&store, "ann/adult").err().unwrap();
    assert!(
        refused.to_string().contains("charges were changed"),
        "{refused}"
    );
    // A table dropped: refused, never made anew.
    server.psql("DROP TABLE replays; DROP TABLE spends;");
    let refused = Ledger::reader_in(&store).err().unwrap().to_string();
    assert!(refused.contains("is not a whole dpkit ledger"), "{refused}");
    assert!(Ledger::reader_in(&store).is_err(), "still refused");
}

/// What a charge and an open cost in PostgreSQL on an account of 10,000
/// charges, as `tests/cost.rs` times them in a file. Timed, not asserted:
/// `cargo test -p dpkit-ledger --release --features postgres --test postgres
/// -- --ignored --nocapture`.
#[test]
#[ignore = "a timing, run by hand"]
fn time_per_charge_and_open_in_postgresql_on_ten_thousand_charges() {
    use std::time::{Duration, Instant};
    let median = |mut times: Vec<Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let server = Postgres::start_durable("ledger-cost");
    let store = Store::Postgres(server.connection());
    Ledger::grant_in(&store, "ann/adult", 1000.0, 0.0).unwrap();
    let ledger = Ledger::open_account_in(&store, "ann/adult").unwrap();
    for i in 0..10_000 {
        ledger
            .charge(pure(0.001), &format!("SELECT COUNT(*) FROM t -- {i}"))
            .unwrap();
    }
    let opens: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            drop(Ledger::open_account_in(&store, "ann/adult").unwrap());
            start.elapsed()
        })
        .collect();
    let charges: Vec<Duration> = (0..20)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..50 {
                ledger
                    .charge(pure(0.001), "SELECT COUNT(*) FROM t")
                    .unwrap();
            }
            start.elapsed() / 50
        })
        .collect();
    println!(
        "PostgreSQL, 10000 charges: open: median {:.2?} of 5; charge: median {:.2?} over 20 \
         batches of 50",
        median(opens),
        median(charges)
    );
}
