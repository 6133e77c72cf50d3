//! The gateway's hot functions, measured alone (`make bench` runs it; figures in
//! docs/benchmarks.md): the 207 body of a PROPFIND (per entry, at 10 to 10,000 entries,
//! to show the cost per entry stays flat), the request path decoder, the `If` header
//! parser, the `Range` parser and HTTP dates.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kubedav_api::fileio::FileInfo;
use kubedav_api::path::VolumePath;
use kubedav_gateway::dav::multistatus::{LiveContext, Prefixes, write_response};
use kubedav_gateway::dav::propfind::Propfind;
use kubedav_gateway::dav::{ifheader, locking};
use kubedav_gateway::http::{dates, paths, range};
use std::hint::black_box;
use std::time::Duration;

fn entry(i: usize) -> FileInfo {
    let path = VolumePath::parse(&format!("photos/2026/IMG_{i:05} (copy).jpg")).unwrap();
    FileInfo {
        path: path.as_str().to_owned(),
        is_collection: false,
        size: 1_234_567 + i as u64,
        modified_unix_ns: 1_790_000_000_000_000_000 + i as i64,
        created_unix_ns: 1_780_000_000_000_000_000,
        etag: format!(
            "{:x}-{:x}-{:x}",
            1000 + i,
            1_234_567 + i,
            1_790_000_000_000_000_000u64 + i as u64
        ),
        validator: String::new(),
    }
}

/// A Depth 1 allprop 207 of `n` entries, written the way the handler writes it: the href
/// from the path fileio sends, then the `response` element.
fn propfind_body(c: &mut Criterion) {
    let mut group = c.benchmark_group("PROPFIND allprop 207");
    let request = Propfind::AllProp { include: Vec::new() };
    let prefixes = Prefixes::of(request.echoed());
    let ctx = LiveContext {
        prefixes: &prefixes,
        usage: None,
        lockdiscovery: "",
        supportedlock: locking::SUPPORTED_LOCK,
    };
    for n in [10usize, 100, 1_000, 10_000] {
        let entries: Vec<_> = (0..n).map(entry).collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("entries", n), &entries, |b, entries| {
            b.iter(|| {
                let mut out = String::with_capacity(64 * 1024);
                let mut href = String::new();
                let base = paths::BasePath::root();
                for info in entries {
                    href.clear();
                    base.write_wire_href(&mut href, &info.path, info.is_collection);
                    let name = kubedav_api::path::last_name(&info.path);
                    write_response(&mut out, &href, info, name, &[], &request, &ctx);
                    if out.len() > 60 * 1024 {
                        black_box(&out);
                        out.clear();
                    }
                }
                black_box(out)
            })
        });
    }
    group.finish();
}

fn parsers(c: &mut Criterion) {
    let base = paths::BasePath::root();
    c.bench_function("decode a request path", |b| {
        b.iter(|| {
            base.decode(black_box("/photos/2026/IMG_00042%20%28copy%29.jpg"))
                .unwrap()
        })
    });
    let if_header = "</locked/> (<urn:uuid:181d4fae-7d8c-11d0-a765-00a0c91e6bf2> [\"a1-b2-c3\"]) \
                     (Not <urn:uuid:58f202ac-22cf-11d1-b12d-002035b29092>)";
    c.bench_function("parse an If header", |b| {
        b.iter(|| ifheader::parse(black_box(if_header), "example.org", &base).unwrap())
    });
    c.bench_function("parse a Range header", |b| {
        b.iter(|| range::parse(black_box("bytes=0-499, 1000-1499, -200")).unwrap())
    });
    c.bench_function("format an HTTP date", |b| {
        let mut out = String::with_capacity(32);
        b.iter(|| {
            out.clear();
            dates::write_http_date(&mut out, black_box(1_790_000_000_123_456_789));
            black_box(out.len())
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = propfind_body, parsers
}
criterion_main!(benches);
