//! The fade's order, whole and its first tenth and hundredth, and a whole fade decision, on the
//! workloads of `benches/bench_activation.py` and `benches/compare_activation.py`: 10^5 and 10^6
//! episodes of 20 traces; one memory of 10,000 episodes for the decision. Each result is checked
//! against the naive twin before it is timed.

mod common;

use std::hint::black_box;

use common::{decision_memory, episode_activations, NOW, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::activation::activation_grouped;
use fadeway_core::fade::{fade, fade_naive, fade_order, fade_order_first, fade_order_naive};

const EPISODES: [usize; 2] = [100_000, 1_000_000];

fn order(c: &mut Criterion) {
    let mut group = c.benchmark_group("fade_order");
    for n in EPISODES {
        let activation = episode_activations(n, SEED);
        let tie: Vec<i64> = (0..n as i64).collect();
        let want = fade_order_naive(&activation, &tie).expect("valid episodes");
        assert_eq!(fade_order(&activation, &tie).expect("valid episodes"), want);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| fade_order(black_box(&activation), &tie))
        });
    }
    group.finish();
}

fn order_prefix(c: &mut Criterion) {
    let mut group = c.benchmark_group("fade_order_first");
    for n in EPISODES {
        let activation = episode_activations(n, SEED);
        let tie: Vec<i64> = (0..n as i64).collect();
        let whole = fade_order_naive(&activation, &tie).expect("valid episodes");
        group.throughput(Throughput::Elements(n as u64));
        for (share, limit) in [("tenth", n / 10), ("hundredth", n / 100)] {
            let got = fade_order_first(&activation, &tie, limit).expect("valid episodes");
            assert_eq!(got, whole[..limit]);
            group.bench_function(BenchmarkId::new(share, n), |b| {
                b.iter(|| fade_order_first(black_box(&activation), &tie, limit))
            });
        }
    }
    group.finish();
}

fn decision(c: &mut Criterion) {
    let m = decision_memory(SEED);
    let decide = || {
        let activation = activation_grouped(&m.offsets, &m.at, &m.score, NOW)?;
        fade(&activation, &m.tie, &m.sizes, m.view, m.landing)
    };
    let activation = activation_grouped(&m.offsets, &m.at, &m.score, NOW).expect("valid traces");
    let want = fade_naive(&activation, &m.tie, &m.sizes, m.view, m.landing).expect("valid");
    assert!(!want.is_empty());
    assert_eq!(decide().expect("valid memory"), want);
    c.bench_function("fade_decision/10000x20", |b| b.iter(|| black_box(decide())));
}

criterion_group!(benches, order, order_prefix, decision);
criterion_main!(benches);
