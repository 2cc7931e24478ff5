//! Ordered parallel map with per-worker state.

use std::sync::{Condvar, Mutex};

/// Applies `f` to every item on `workers` threads (each with its own state from `init`);
/// results come back in item order.
pub(super) fn map<T: Sync, S, R: Send>(
    items: &[T],
    workers: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let mut out = Vec::with_capacity(items.len());
    let all: Result<(), std::convert::Infallible> = stream(
        items,
        workers,
        u64::MAX,
        |_| 1,
        init,
        f,
        |_, r| {
            out.push(r);
            Ok(())
        },
    );
    let Ok(()) = all;
    out
}

/// Applies `f` to every item on `workers` threads (each with its own state from `init`)
/// while the calling thread hands the results to `consume` in item order, as soon as each
/// is ready. Workers take items in order and stay at most `window` (in `weight` units)
/// ahead of `consume`, which bounds the memory held by finished results. The first error
/// of `consume` stops the workers and is returned.
pub(super) fn stream<T: Sync, S, R: Send, E>(
    items: &[T],
    workers: usize,
    window: u64,
    weight: impl Fn(&T) -> u64 + Sync,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
    mut consume: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    struct State<R> {
        results: Vec<Option<R>>,
        next: usize,
        in_flight: u64,
        stop: bool,
    }
    let state = Mutex::new(State {
        results: items.iter().map(|_| None).collect(),
        next: 0,
        in_flight: 0,
        stop: false,
    });
    let cv = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let workers = workers.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut st = init();
                loop {
                    let i = {
                        let mut g = lock();
                        loop {
                            if g.stop || g.next >= items.len() {
                                return;
                            }
                            let w = weight(&items[g.next]);
                            if g.in_flight == 0 || g.in_flight + w <= window {
                                g.in_flight += w;
                                g.next += 1;
                                break g.next - 1;
                            }
                            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
                        }
                    };
                    let r = f(&mut st, &items[i]);
                    lock().results[i] = Some(r);
                    cv.notify_all();
                }
            });
        }
        let mut result = Ok(());
        for (i, item) in items.iter().enumerate() {
            let r = {
                let mut g = lock();
                loop {
                    if let Some(r) = g.results[i].take() {
                        break r;
                    }
                    g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            };
            result = consume(i, r);
            let mut g = lock();
            g.in_flight -= weight(item);
            if result.is_err() {
                g.stop = true;
            }
            drop(g);
            cv.notify_all();
            if result.is_err() {
                break;
            }
        }
        result
    })
}
