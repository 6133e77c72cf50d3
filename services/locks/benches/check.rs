//! The cost of the lock check a write makes, with 10 and with 10,000 active locks
//! elsewhere in the tree, on the in-memory store (`make bench` runs it; the figures go
//! in docs/benchmarks.md), with and without reporting the tree free of locks around the
//! write (`report_free_root`, which only a gateway's cache asks for). The store finds the locks that apply to a path by its
//! ancestors and the locks below a collection by one range scan, so the cost must not
//! grow with the number of locks held on other resources.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kubedav_api::locks::{CheckWriteRequest, LockDepth, LockRequest, Locks, Scope, WriteTarget};
use kubedav_locks::MemoryLocks;
use std::time::Duration;

/// A store holding `count` exclusive locks on files of other collections.
fn store_with(runtime: &tokio::runtime::Runtime, count: usize) -> MemoryLocks {
    let store = MemoryLocks::new(Duration::from_secs(3600));
    runtime.block_on(async {
        for i in 0..count {
            let response = store
                .lock(LockRequest {
                    path: format!("elsewhere/d{}/f{i}", i % 100),
                    scope: Scope::Exclusive as i32,
                    depth: LockDepth::Zero as i32,
                    principal: "bench".into(),
                    timeout_seconds: 3600,
                    ..Default::default()
                })
                .await
                .unwrap();
            assert!(response.lock.is_some());
        }
    });
    store
}

fn check(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut group = c.benchmark_group("lock check of a PUT");
    for count in [10, 10_000] {
        let store = store_with(&runtime, count);
        let request = CheckWriteRequest {
            targets: vec![WriteTarget {
                path: "work/docs/report.txt".into(),
                recursive: false,
            }],
            principal: "bench".into(),
            request_path: "work/docs/report.txt".into(),
            ..Default::default()
        };
        group.bench_with_input(
            BenchmarkId::new("active locks elsewhere", count),
            &request,
            |b, request| b.iter(|| runtime.block_on(store.check_write(request.clone())).unwrap()),
        );
        // As a gateway that keeps trees free of locks asks (microservices mode).
        let reporting = CheckWriteRequest {
            report_free_root: true,
            ..request.clone()
        };
        group.bench_with_input(
            BenchmarkId::new("active locks elsewhere, reporting the free tree", count),
            &reporting,
            |b, request| b.iter(|| runtime.block_on(store.check_write(request.clone())).unwrap()),
        );
        let collection = CheckWriteRequest {
            targets: vec![WriteTarget {
                path: "work".into(),
                recursive: true,
            }],
            principal: "bench".into(),
            request_path: "work".into(),
            ..Default::default()
        };
        group.bench_with_input(
            BenchmarkId::new("DELETE of a collection, active locks elsewhere", count),
            &collection,
            |b, request| b.iter(|| runtime.block_on(store.check_write(request.clone())).unwrap()),
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = check
}
criterion_main!(benches);
