//! The worker pool: starts each task once everything it needs has succeeded, skips the
//! dependents of a failure, and stops starting tasks on Ctrl-C.

use std::collections::BTreeSet;
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Interrupt, Status, Task};

/// What the workers report, in the order it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    Started(usize),
    Finished(usize, Status, Duration),
    /// Ctrl-C seen; `running` tasks are still being waited for.
    Interrupted {
        running: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Done(Status, Duration),
}

struct Shared {
    state: Vec<State>,
    /// Needs of each waiting task that have not succeeded yet.
    unmet: Vec<usize>,
    /// Tasks whose needs all succeeded, by IR position: earlier levels go first.
    ready: BTreeSet<usize>,
    running: usize,
    announced: bool,
}

/// Interrupt polling interval of idle workers.
const POLL: Duration = Duration::from_millis(50);

/// Runs `tasks` on `parallelism` threads with `execute`, reporting on `events`. Returns
/// each task's status and duration, in task order; tasks never reached are `NotStarted`.
pub(super) fn schedule(
    tasks: &[Task],
    parallelism: usize,
    interrupt: &Interrupt,
    execute: impl Fn(&Task) -> Status + Sync,
    events: Sender<Event>,
) -> Vec<(Status, Duration)> {
    let mut dependents = vec![Vec::new(); tasks.len()];
    for (i, task) in tasks.iter().enumerate() {
        for &n in &task.needs {
            dependents[n].push(i);
        }
    }
    let unmet: Vec<usize> = tasks.iter().map(|t| t.needs.len()).collect();
    let ready = (0..tasks.len()).filter(|&i| unmet[i] == 0).collect();
    let shared = Mutex::new(Shared {
        state: vec![State::Waiting; tasks.len()],
        unmet,
        ready,
        running: 0,
        announced: false,
    });
    let wake = Condvar::new();

    let worker = |events: Sender<Event>| loop {
        let index = {
            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if interrupt.is_set() {
                    if !s.announced {
                        s.announced = true;
                        let _ = events.send(Event::Interrupted { running: s.running });
                    }
                    return;
                }
                if let Some(i) = s.ready.pop_first() {
                    s.running += 1;
                    s.state[i] = State::Running;
                    break i;
                }
                // Nothing ready and nothing running: the rest is skipped or unreachable.
                if s.running == 0 {
                    wake.notify_all();
                    return;
                }
                s = wake
                    .wait_timeout(s, POLL)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        let _ = events.send(Event::Started(index));
        let started = Instant::now();
        let status = execute(&tasks[index]);
        let duration = started.elapsed();

        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.running -= 1;
        let succeeded = status == Status::Succeeded;
        s.state[index] = State::Done(status.clone(), duration);
        let _ = events.send(Event::Finished(index, status, duration));
        if succeeded {
            for &d in &dependents[index] {
                s.unmet[d] -= 1;
                if s.unmet[d] == 0 && s.state[d] == State::Waiting {
                    s.ready.insert(d);
                }
            }
        } else if !interrupt.is_set() {
            // Every transitive dependent is waiting: none can have started without this.
            // After Ctrl-C a failure is most likely the interrupt itself, so its
            // dependents are left to be reported as not started instead.
            let because = tasks[index].job.clone();
            let mut stack = dependents[index].clone();
            while let Some(d) = stack.pop() {
                if s.state[d] != State::Waiting {
                    continue;
                }
                // A job that runs whatever its needs' outcome counts this one as done.
                if tasks[d].always {
                    s.unmet[d] -= 1;
                    if s.unmet[d] == 0 {
                        s.ready.insert(d);
                    }
                    continue;
                }
                let status = Status::Skipped {
                    because: because.clone(),
                };
                s.state[d] = State::Done(status.clone(), Duration::ZERO);
                s.ready.remove(&d);
                let _ = events.send(Event::Finished(d, status, Duration::ZERO));
                stack.extend(dependents[d].iter().copied());
            }
        }
        drop(s);
        wake.notify_all();
    };

    let worker = &worker;
    std::thread::scope(|scope| {
        for _ in 0..parallelism.min(tasks.len()).max(1) {
            let events = events.clone();
            scope.spawn(move || worker(events));
        }
    });
    drop(events);

    let shared = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
    shared
        .state
        .into_iter()
        .map(|state| match state {
            State::Done(status, duration) => (status, duration),
            State::Waiting | State::Running => (Status::NotStarted, Duration::ZERO),
        })
        .collect()
}
