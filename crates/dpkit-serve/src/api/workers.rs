//! The threads that run requests: `workers` of them, started with the
//! server and kept, each with a stack deep enough for planning, so a
//! request is planned on the thread that runs it
//! (see [`dpkit_query::spawn_planning_thread`]). A run is handed to them
//! only once it has its turn ([`super::turns`]), so there are never more
//! runs than threads and none waits here.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// One run, with everything it holds until it ends.
type Job = Box<dyn FnOnce() + Send>;

/// The workers' queue. Dropping it ends each worker after its run.
pub(crate) struct Workers {
    queue: Mutex<Sender<Job>>,
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
            queue: Mutex::new(queue),
        })
    }

    /// Runs `work` on a worker and returns its outcome; `None` if it
    /// panicked or no worker is left.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (answer, outcome) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            if let Ok(done) = done {
                let _ = answer.send(done);
            }
        });
        self.queue.lock().ok()?.send(job).ok()?;
        outcome.await.ok()
    }
}

/// The next job, or `None` once the queue is gone.
fn next(jobs: &Mutex<Receiver<Job>>) -> Option<Job> {
    jobs.lock().ok()?.recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_go_to_the_workers_and_a_panic_leaves_them_running() {
        let workers = Workers::start(2).unwrap();
        let name = workers
            .run(|| std::thread::current().name().map(str::to_string))
            .await;
        assert!(name.flatten().unwrap().starts_with("dpkit-worker-"));
        assert_eq!(workers.run(|| -> u8 { panic!("a run failed") }).await, None);
        // The worker that panicked is still there.
        for _ in 0..4 {
            assert_eq!(workers.run(|| 7).await, Some(7));
        }
    }
}
