//! Whose run goes next. At most `workers` runs go at once over all
//! analysts, and at most `per_analyst` of one analyst's; when a worker
//! frees, the analysts who wait take it in turn (round robin), and each
//! analyst's own requests go in the order they came. So an analyst who
//! keeps many slow queries in flight holds at most `per_analyst` workers,
//! and another analyst's request waits at most for one run to end, not
//! for the first analyst's whole queue.
//!
//! What a wait depends on: how many runs each analyst has under way or
//! waiting, and how long the runs under way take. It does not look at
//! what they ask.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The turns of every analyst.
pub struct Turns {
    workers: usize,
    per_analyst: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    analysts: HashMap<String, Queue>,
    /// Analysts with a request waiting, in the order their turn comes.
    turn: VecDeque<String>,
}

#[derive(Default)]
struct Queue {
    running: usize,
    waiting: VecDeque<oneshot::Sender<Slot>>,
}

/// A worker held for one run; dropping it frees the worker for the next turn.
pub struct Slot {
    turns: Arc<Turns>,
    analyst: String,
}

/// Slots handed out under the lock, sent after it is released (a slot whose
/// request has gone is dropped there, which takes the lock again).
type Handed = Vec<(oneshot::Sender<Slot>, Slot)>;

impl Turns {
    /// Turns for `workers` runs at once, `per_analyst` of them at most for
    /// one analyst (both ≥ 1; `per_analyst` ≤ `workers`).
    pub fn new(workers: usize, per_analyst: usize) -> Arc<Self> {
        Arc::new(Self {
            workers: workers.max(1),
            per_analyst: per_analyst.clamp(1, workers.max(1)),
            state: Mutex::default(),
        })
    }

    /// Waits for `analyst`'s turn and a free worker. A request dropped
    /// while it waits (its client left) gives up its place.
    pub async fn take(self: &Arc<Self>, analyst: &str) -> Option<Slot> {
        let receiver = {
            let mut state = self.state.lock().ok()?;
            let free = state.running < self.workers;
            let queue = queue_of(&mut state, analyst);
            // No one else can be waiting with a run to spare while a worker
            // is free: the worker would have been handed to them.
            if free && queue.waiting.is_empty() && queue.running < self.per_analyst {
                return Some(self.hand(&mut state, analyst));
            }
            let (sender, receiver) = oneshot::channel();
            queue.waiting.push_back(sender);
            if !state.turn.iter().any(|a| a == analyst) {
                state.turn.push_back(analyst.to_string());
            }
            receiver
        };
        receiver.await.ok()
    }

    /// Counts a run of `analyst` as started.
    fn hand(self: &Arc<Self>, state: &mut State, analyst: &str) -> Slot {
        state.running += 1;
        queue_of(state, analyst).running += 1;
        Slot {
            turns: self.clone(),
            analyst: analyst.to_string(),
        }
    }

    /// Hands free workers to the waiting analysts, one each in turn.
    fn next_turns(self: &Arc<Self>, state: &mut State) -> Handed {
        let mut handed = Vec::new();
        let mut passed = 0;
        while state.running < self.workers && passed < state.turn.len() {
            let Some(analyst) = state.turn.pop_front() else {
                break;
            };
            let queue = queue_of(state, &analyst);
            if queue.running >= self.per_analyst {
                // At its bound: its turn comes again when one of its runs ends.
                state.turn.push_back(analyst);
                passed += 1;
                continue;
            }
            let Some(sender) = queue.waiting.pop_front() else {
                if queue.running == 0 {
                    state.analysts.remove(&analyst);
                }
                continue;
            };
            if sender.is_closed() {
                // Its client left while it waited: the next request in line.
                state.turn.push_front(analyst);
                continue;
            }
            if !queue.waiting.is_empty() {
                state.turn.push_back(analyst.clone());
            }
            passed = 0;
            let slot = self.hand(state, &analyst);
            handed.push((sender, slot));
        }
        handed
    }

    /// Ends a run of `analyst`, and hands the worker on.
    fn release(self: &Arc<Self>, analyst: &str) {
        let handed = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            state.running -= 1;
            let queue = queue_of(&mut state, analyst);
            queue.running -= 1;
            if queue.running == 0 && queue.waiting.is_empty() {
                state.analysts.remove(analyst);
            }
            self.next_turns(&mut state)
        };
        send(handed);
    }

    /// Runs under way, and requests waiting for their turn.
    pub fn load(&self) -> (usize, usize) {
        let Ok(state) = self.state.lock() else {
            return (0, 0);
        };
        let waiting = state.analysts.values().map(|q| q.waiting.len()).sum();
        (state.running, waiting)
    }
}

fn queue_of<'a>(state: &'a mut State, analyst: &str) -> &'a mut Queue {
    state.analysts.entry(analyst.to_string()).or_default()
}

/// Sends each slot to its request; one whose request has gone comes back
/// and is dropped, which frees its worker for the next turn.
fn send(handed: Handed) {
    for (sender, slot) in handed {
        drop(sender.send(slot));
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.turns.release(&self.analyst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    /// Whether `future` has finished after one poll.
    fn ready<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match future.poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn one_analyst_holds_at_most_its_share_and_the_others_take_turns() {
        runtime().block_on(async {
            let turns = Turns::new(2, 1);
            let a1 = turns.take("a").await.unwrap();
            // a is at its bound: its second request waits though a worker is free.
            let mut a2 = Box::pin(turns.take("a"));
            assert!(ready(a2.as_mut()).is_none());
            let b1 = turns.take("b").await.unwrap();
            assert_eq!(turns.load(), (2, 1));
            // Both workers are busy: b's second and c's first wait too,
            // and the turn goes a, b, c, in the order they began to wait.
            let mut b2 = Box::pin(turns.take("b"));
            let mut c1 = Box::pin(turns.take("c"));
            assert!(ready(b2.as_mut()).is_none() && ready(c1.as_mut()).is_none());
            // b's run ends: a is at its bound, so b's next request goes.
            drop(b1);
            let b2 = ready(b2.as_mut()).flatten().expect("b's turn");
            assert!(ready(c1.as_mut()).is_none() && ready(a2.as_mut()).is_none());
            // a's run ends: c's turn comes before a's second.
            drop(a1);
            let c1 = ready(c1.as_mut()).flatten().expect("c's turn");
            assert!(ready(a2.as_mut()).is_none());
            drop(b2);
            let a2 = ready(a2.as_mut()).flatten().expect("a's turn");
            assert_eq!(turns.load(), (2, 0));
            drop((a2, c1));
            assert_eq!(turns.load(), (0, 0));
        });
    }

    #[test]
    fn a_request_that_leaves_while_it_waits_gives_its_worker_on() {
        runtime().block_on(async {
            let turns = Turns::new(1, 1);
            let a = turns.take("a").await.unwrap();
            let mut gone = Box::pin(turns.take("b"));
            let mut c = Box::pin(turns.take("c"));
            assert!(ready(gone.as_mut()).is_none() && ready(c.as_mut()).is_none());
            drop(gone);
            drop(a);
            let c = ready(c.as_mut())
                .flatten()
                .expect("c gets the worker b left");
            assert_eq!(turns.load(), (1, 0));
            drop(c);
            assert_eq!(turns.load(), (0, 0));
        });
    }

    #[test]
    fn analysts_take_turns_whatever_each_has_queued() {
        runtime().block_on(async {
            let turns = Turns::new(1, 1);
            let mut held = turns.take("x").await;
            let names = ["a", "a", "a", "b", "c"];
            let mut waiting: Vec<_> = names
                .iter()
                .map(|n| Some(Box::pin(turns.take(n))))
                .collect();
            for future in waiting.iter_mut().flatten() {
                assert!(ready(future.as_mut()).is_none());
            }
            let mut order = Vec::new();
            for _ in 0..names.len() {
                drop(held.take());
                for (name, future) in names.iter().zip(waiting.iter_mut()) {
                    if let Some(slot) = future.as_mut().and_then(|f| ready(f.as_mut())) {
                        held = slot;
                        order.push(*name);
                        *future = None;
                    }
                }
            }
            assert_eq!(order, ["a", "b", "c", "a", "a"]);
        });
    }
}
