//! Activation grouped by episode and in log order, on the workload of
//! `benches/bench_activation.py`: 10^5 and 10^6 traces, ~20 an episode, ages log-uniform from a
//! minute to a year. Each result is checked against the naive twin before it is timed.

mod common;

use std::hint::black_box;

use common::{assert_close, in_log_order, trace_log, NOW, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::activation::{
    activation_grouped, activation_grouped_naive, activation_log_order,
};

const TRACES: [usize; 2] = [100_000, 1_000_000];
/// How close the kernels are to the formula (the Python benches' tolerance).
const RELATIVE: f64 = 1e-12;

fn grouped(c: &mut Criterion) {
    let mut group = c.benchmark_group("activation_grouped");
    for n in TRACES {
        let (offsets, at, score) = trace_log(n, SEED);
        let want = activation_grouped_naive(&offsets, &at, &score, NOW).expect("valid traces");
        let got = activation_grouped(&offsets, &at, &score, NOW).expect("valid traces");
        assert_close(&got, &want, RELATIVE);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| activation_grouped(black_box(&offsets), black_box(&at), &score, NOW))
        });
    }
    group.finish();
}

fn log_order(c: &mut Criterion) {
    let mut group = c.benchmark_group("activation_log_order");
    for n in TRACES {
        let (offsets, at, score) = trace_log(n, SEED);
        let want = activation_grouped_naive(&offsets, &at, &score, NOW).expect("valid traces");
        let (ids, at, score) = in_log_order(&offsets, &at, &score);
        let groups = offsets.len() - 1;
        let got = activation_log_order(&ids, &at, &score, NOW, groups).expect("valid traces");
        assert_close(&got, &want, RELATIVE);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| activation_log_order(black_box(&ids), black_box(&at), &score, NOW, groups))
        });
    }
    group.finish();
}

criterion_group!(benches, grouped, log_order);
criterion_main!(benches);
