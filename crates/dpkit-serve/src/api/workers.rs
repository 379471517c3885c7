//! The threads that run requests: `workers` of them, started with the
//! server and kept, each with a stack deep enough for planning, so a
//! request is planned on the thread that runs it
//! (see [`dpkit_query::spawn_planning_thread`]). A run is handed to them
//! only once it has its turn ([`super::turns`]), and gives its turn back
//! as its last step: a run waits here at most for a worker to end the run
//! before it (send its outcome, go back to the queue).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};

/// One run, with everything it holds until it ends.
type Job = Box<dyn FnOnce() + Send>;

/// The workers' queue. Dropping it ends each worker after its run.
pub(crate) struct Workers {
    queue: Sender<Job>,
    running: Arc<Running>,
}

/// How many runs are handed over and not yet ended.
#[derive(Default)]
pub(crate) struct Running {
    count: Mutex<usize>,
    ended: Condvar,
}

impl Running {
    /// Waits until every run handed over has ended.
    pub(crate) fn wait_for_none(&self) {
        let Ok(mut count) = self.count.lock() else {
            return;
        };
        while *count > 0 {
            match self.ended.wait(count) {
                Ok(next) => count = next,
                Err(_) => return,
            }
        }
    }

    fn add(&self, step: isize) {
        if let Ok(mut count) = self.count.lock() {
            *count = count.saturating_add_signed(step);
            self.ended.notify_all();
        }
    }
}

/// Counts a run as ended when dropped, even by a panic.
struct Ends(Arc<Running>);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.add(-1);
    }
}

impl Workers {
    /// Starts `count` workers.
    pub(crate) fn start(count: usize) -> crate::Result<Self> {
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for index in 0..count.max(1) {
            let jobs = jobs.clone();
            dpkit_query::spawn_planning_thread(format!("dpkit-worker-{index}"), move || {
                while let Some(job) = next(&jobs) {
                    job();
                }
            })
            .map_err(|e| crate::ServeError::Io(format!("cannot start a worker: {e}")))?;
        }
        Ok(Self {
            queue,
            running: Arc::default(),
        })
    }

    /// The count of runs under way, to wait for at shutdown.
    pub(crate) fn running(&self) -> Arc<Running> {
        self.running.clone()
    }

    /// Runs `work` on a worker and returns its outcome; `None` if it
    /// panicked or no worker is left.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (answer, outcome) = tokio::sync::oneshot::channel();
        self.running.add(1);
        let ends = Ends(self.running.clone());
        let job: Job = Box::new(move || {
            let _ends = ends;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
                Ok(done) => {
                    let _ = answer.send(done);
                }
                // A panic's payload whose drop panics too must not end
                // the worker.
                Err(payload) => {
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(payload)));
                }
            }
        });
        self.queue.send(job).ok()?;
        outcome.await.ok()
    }
}

/// The next job, or `None` once the queue is gone.
fn next(jobs: &Mutex<Receiver<Job>>) -> Option<Job> {
    jobs.lock().ok()?.recv().ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::time::Duration;

    use super::*;

    /// `work`'s outcome, failing the test if it takes a minute.
    async fn within_a_minute<T: Send + 'static>(
        workers: &Workers,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        tokio::time::timeout(Duration::from_secs(60), workers.run(work))
            .await
            .expect("a run was not answered")
    }

    #[tokio::test]
    async fn a_panic_is_no_answer_and_its_worker_runs_on() {
        let workers = Workers::start(1).unwrap();
        let name = within_a_minute(&workers, || {
            std::thread::current().name().map(str::to_string)
        })
        .await;
        assert_eq!(name.flatten().as_deref(), Some("dpkit-worker-0"));
        let panicked = within_a_minute(&workers, || -> u8 { panic!("a run failed") }).await;
        assert_eq!(panicked, None);
        // The one worker is still there.
        assert_eq!(within_a_minute(&workers, || 7).await, Some(7));
        workers.running().wait_for_none();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_worker_runs_a_run_at_once() {
        let workers = Arc::new(Workers::start(2).unwrap());
        // Neither run ends before both have started.
        let both = Arc::new(Barrier::new(2));
        let runs = (0..2).map(|_| {
            let (workers, both) = (workers.clone(), both.clone());
            tokio::spawn(async move { within_a_minute(&workers, move || both.wait()).await })
        });
        for run in runs.collect::<Vec<_>>() {
            assert!(run.await.unwrap().is_some());
        }
        workers.running().wait_for_none();
    }
}
