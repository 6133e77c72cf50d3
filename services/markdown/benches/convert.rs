//! Conversion figures (`make bench`): for a small (~0.4 KB), a medium (~10 KB) and a
//! large (~1 MB) page, and for real pages of the Rust documentation when the toolchain
//! has them: throughput (MB/s of HTML input at the median), p50/p99 latency and the peak
//! heap a conversion allocates, for kubedav's converter, the first-generation one it
//! replaced (html5ever building an `RcDom`, kept in `baseline.rs`) and the `htmd` crate,
//! in the same run and alternating rounds.

#![allow(unsafe_code)] // the counting allocator forwards to the system's

// The baseline is kept as it was shipped; lints written for new code do not apply.
#[allow(clippy::enum_variant_names, dead_code, unreachable_pub)]
mod baseline;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the bytes allocated now and the most at once since the last reset.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters
// only add up sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from System with this layout (alloc or realloc above).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let now =
                CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: as for dealloc; `new_size` is the caller's, checked by its contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A page of `sections` sections with headings, paragraphs, links, lists, code and a table.
fn page(sections: usize) -> String {
    let mut html = String::from(
        "<!DOCTYPE html><html><head><title>Bench</title></head><body><nav><a href=\"/\">Home</a></nav><main>",
    );
    for i in 0..sections {
        html.push_str(&format!(
            "<h2>Section {i}</h2><p>Some <em>emphasis</em>, <strong>strong</strong> and <code>code</code> with a \
             <a href=\"/docs/{i}\">link</a>.</p><ul><li>first</li><li>second <b>item</b></li></ul>\
             <pre><code class=\"language-rust\">fn f{i}() -> u32 {{ {i} }}</code></pre>\
             <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>{i}</td></tr></table>"
        ));
    }
    html.push_str("</main></body></html>");
    html
}

/// Real pages from the toolchain's documentation, when installed.
fn rust_pages() -> Vec<(String, String)> {
    let Ok(out) = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
    else {
        return Vec::new();
    };
    let docs =
        std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("share/doc/rust/html");
    [
        ("book page", "book/ch04-01-what-is-ownership.html"),
        ("std Vec", "std/vec/struct.Vec.html"),
    ]
    .iter()
    .filter_map(|(name, path)| Some((name.to_string(), std::fs::read_to_string(docs.join(path)).ok()?)))
    .collect()
}

const ENGINES: [&str; 3] = ["kubedav", "baseline", "htmd"];

fn run(engine: &str, html: &str) -> usize {
    match engine {
        "kubedav" => kubedav_markdown::convert(
            html.as_bytes(),
            "text/html",
            &kubedav_markdown::Options::default(),
        )
        .expect("converts")
        .markdown
        .len(),
        "baseline" => baseline::convert(html.as_bytes(), "text/html", &baseline::Options::default())
            .expect("converts")
            .markdown
            .len(),
        _ => htmd::convert(html).expect("converts").len(),
    }
}

/// The most heap one conversion holds at once, above what was held before it.
fn peak_bytes(engine: &str, html: &str) -> usize {
    let before = CURRENT.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    std::hint::black_box(run(engine, html));
    PEAK.load(Ordering::Relaxed) - before
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MILLIS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    );
    let mut inputs = vec![
        ("small".to_string(), page(1)),
        ("medium".to_string(), page(31)),
        ("large".to_string(), page(3050)),
    ];
    inputs.extend(rust_pages());
    println!(
        "{:<10} {:>9} {:<9} {:>8} {:>10} {:>10} {:>11} {:>7}",
        "input", "bytes", "engine", "MB/s", "p50", "p99", "peak heap", "speedup"
    );
    for (name, html) in &inputs {
        let bytes = html.len();
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); ENGINES.len()];
        // Alternating rounds, so a noisy neighbour slows every engine alike.
        let round = budget / 10;
        let started = Instant::now();
        while started.elapsed() < budget * ENGINES.len() as u32 || times.iter().any(|t| t.len() < 20) {
            for (i, engine) in ENGINES.iter().enumerate() {
                let until = Instant::now() + round;
                loop {
                    let t = Instant::now();
                    std::hint::black_box(run(engine, html));
                    times[i].push(t.elapsed());
                    if Instant::now() > until && times[i].len() >= 3 {
                        break;
                    }
                }
            }
        }
        for t in &mut times {
            t.sort();
        }
        let baseline = percentile(&times[1], 0.5);
        for (i, engine) in ENGINES.iter().enumerate() {
            let p50 = percentile(&times[i], 0.5);
            let mbs = bytes as f64 / 1e6 / p50.as_secs_f64();
            let peak = peak_bytes(engine, html);
            println!(
                "{name:<10} {bytes:>9} {engine:<9} {mbs:>8.1} {:>10.3?} {:>10.3?} {:>7.2} MiB {:>6.2}×",
                p50,
                percentile(&times[i], 0.99),
                peak as f64 / (1 << 20) as f64,
                baseline.as_secs_f64() / p50.as_secs_f64(),
            );
        }
    }
    println!(
        "(speedup: the baseline's median time over the engine's; peak heap: the most one conversion holds at once)"
    );
}
