//! Event queue throughput: the hold model (N pending events; pop one, push one at the popped
//! time plus an exponential-ish increment) at 1 M and 4 M pending, and a fill-and-drain burst
//! (push 1 M events at random times, pop them all), `EventQueue` against
//! `std::collections::BinaryHeap` in the same run, with the same increment sequence.
//!
//! Run: `cargo bench -p mrc-sim --bench event_queue`. Besides criterion's per-operation times it
//! prints a summary with events/s for each queue and their ratio.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use mrc_sim::core::queue::EventQueue;
use mrc_sim::core::rng::Rng;
use mrc_sim::core::time::Time;

/// Pending events in the hold model.
const PENDING: usize = 1_000_000;
/// Mean increment (ps): 1 us, i.e. 1 M pending events spread over ~ a microsecond-scale window.
const MEAN_PS: f64 = 1_000_000.0;
/// Increments are drawn from a fixed table so generating them costs the same for both queues.
const TABLE: usize = 1 << 16;

fn increments(seed: u64) -> Vec<u64> {
    let mut r = Rng::new(seed);
    (0..TABLE)
        .map(|_| {
            // Exponential by inversion; some zero-delay and far (timer-like) events mixed in.
            let u = (r.u64() >> 11) as f64 / (1u64 << 53) as f64;
            let x = -(1.0 - u).ln() * MEAN_PS;
            match r.below(100) {
                0..=4 => 0,
                5 => (x * 100.0) as u64,
                _ => x as u64,
            }
        })
        .collect()
}

struct Wheel(EventQueue<u64>);

impl Wheel {
    fn push(&mut self, t: u64, payload: u64) {
        self.0.push(Time::from_ps(t), payload);
    }
}

/// The baseline: a max-heap of reversed `(time, seq, payload)`, seq for FIFO ties.
struct Heap(BinaryHeap<Reverse<(u64, u64, u64)>>, u64);

impl Heap {
    #[inline]
    fn push(&mut self, t: u64, payload: u64) {
        self.1 += 1;
        self.0.push(Reverse((t, self.1, payload)));
    }
}

trait Push {
    fn push_event(&mut self, t: u64, payload: u64);
}
impl Push for Wheel {
    fn push_event(&mut self, t: u64, payload: u64) {
        self.push(t, payload);
    }
}
impl Push for Heap {
    fn push_event(&mut self, t: u64, payload: u64) {
        self.push(t, payload);
    }
}

struct Model<Q> {
    q: Q,
    inc: Vec<u64>,
    i: usize,
    now: u64,
}

impl<Q: Push> Model<Q> {
    fn new(q: Q, inc: Vec<u64>) -> Self {
        Self::with_pending(q, inc, PENDING)
    }

    fn with_pending(mut q: Q, inc: Vec<u64>, pending: usize) -> Self {
        let mut i = 0;
        for k in 0..pending {
            q.push_event(inc[i % TABLE] * 2, k as u64);
            i += 1;
        }
        Model { q, inc, i, now: 0 }
    }
}

/// One hold step that tracks the popped time exactly.
macro_rules! step {
    ($m:expr, $pop:expr) => {{
        let (t, p) = $pop;
        let d = $m.inc[$m.i & (TABLE - 1)];
        $m.i += 1;
        $m.now = t;
        (t + d, p)
    }};
}

fn wheel_step(m: &mut Model<Wheel>) {
    let (t, p) = step!(m, {
        let e = m.q.0.pop().expect("hold keeps the queue full");
        (e.time.as_ps(), e.payload)
    });
    m.q.0.push(Time::from_ps(t), black_box(p));
}

fn heap_step(m: &mut Model<Heap>) {
    let (t, p) = step!(m, {
        let Reverse((t, _, p)) = m.q.0.pop().expect("hold keeps the queue full");
        (t, p)
    });
    m.q.push(t, black_box(p));
}

fn bench(c: &mut Criterion) {
    let inc = increments(1);
    let mut g = c.benchmark_group("hold_1M");
    g.throughput(Throughput::Elements(1));
    let mut w = Model::new(Wheel(EventQueue::new()), inc.clone());
    g.bench_function("event_queue", |b| b.iter(|| wheel_step(&mut w)));
    let mut h = Model::new(Heap(BinaryHeap::new(), 0), inc.clone());
    g.bench_function("binary_heap", |b| b.iter(|| heap_step(&mut h)));
    g.finish();
    drop((w, h));

    let mut g = c.benchmark_group("hold_4M");
    g.throughput(Throughput::Elements(1));
    let mut w = Model::with_pending(Wheel(EventQueue::new()), inc.clone(), 4 * PENDING);
    g.bench_function("event_queue", |b| b.iter(|| wheel_step(&mut w)));
    drop(w);
    let mut h = Model::with_pending(Heap(BinaryHeap::new(), 0), inc.clone(), 4 * PENDING);
    g.bench_function("binary_heap", |b| b.iter(|| heap_step(&mut h)));
    g.finish();
    drop(h);

    // Fill and drain: BURST pushes at times spread over a millisecond, then every pop (the
    // queue's grow and shrink re-layouts included).
    const BURST: usize = 1 << 20;
    let times: Vec<u64> = {
        let mut r = Rng::new(3);
        (0..BURST).map(|_| r.below(1_000_000_000)).collect()
    };
    let mut g = c.benchmark_group("fill_drain_1M");
    g.throughput(Throughput::Elements(BURST as u64));
    g.sample_size(10);
    // Each burst starts where the previous one's simulated time ended (a simulator never
    // schedules into the past; the wheel would hand such events to its front heap).
    let mut q = EventQueue::new();
    let mut base = 0u64;
    g.bench_function("event_queue", |b| {
        b.iter(|| {
            for (k, &t) in times.iter().enumerate() {
                q.push(Time::from_ps(base + t), k as u64);
            }
            let mut last = 0;
            while let Some(e) = q.pop() {
                last = e.payload;
                base = e.time.as_ps();
            }
            black_box(last)
        })
    });
    let mut h = Heap(BinaryHeap::new(), 0);
    let mut base = 0u64;
    g.bench_function("binary_heap", |b| {
        b.iter(|| {
            for (k, &t) in times.iter().enumerate() {
                h.push(base + t, k as u64);
            }
            let mut last = 0;
            while let Some(Reverse((t, _, p))) = h.0.pop() {
                last = p;
                base = t;
            }
            black_box(last)
        })
    });
    g.finish();
}

/// Wall-clock summary in one run: events/s for each queue and the ratio.
fn summary() {
    // `OPS=n` in the environment overrides the count.
    let ops: u64 = std::env::var("OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000_000);
    let inc = increments(2);
    let mut w = Model::new(Wheel(EventQueue::new()), inc.clone());
    let mut h = Model::new(Heap(BinaryHeap::new(), 0), inc);
    for _ in 0..ops / 5 {
        wheel_step(&mut w);
        heap_step(&mut h);
    }
    let t0 = Instant::now();
    for _ in 0..ops {
        wheel_step(&mut w);
    }
    let wheel_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    for _ in 0..ops {
        heap_step(&mut h);
    }
    let heap_s = t0.elapsed().as_secs_f64();
    assert_eq!(w.now, h.now, "both queues must pop the same times");
    let qs = w.q.0.stats();
    println!(
        "hold model, {PENDING} pending, {ops} pop+push each (one event = one pop + one push):"
    );
    println!(
        "  EventQueue : {:>6.2} M events/s  ({:.1} ns/event)",
        ops as f64 / wheel_s / 1e6,
        wheel_s * 1e9 / ops as f64
    );
    println!(
        "  BinaryHeap : {:>6.2} M events/s  ({:.1} ns/event)",
        ops as f64 / heap_s / 1e6,
        heap_s * 1e9 / ops as f64
    );
    println!("  ratio      : {:.2}x", heap_s / wheel_s);
    println!(
        "  queue work : {} bucket loads, {} migrations, {} rebuilds",
        qs.bucket_loads, qs.migrations, qs.rebuilds
    );
}

criterion_group!(benches, bench);

fn main() {
    summary();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
