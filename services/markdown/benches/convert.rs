//! Conversion figures (`make bench`): throughput (MB/s of HTML input) and p50/p99 latency
//! for a small (~0.4 KB), a medium (~10 KB) and a large (~1 MB) page; how the time splits
//! between html5ever's parse and the rendering; and the `htmd` crate on the same inputs
//! in the same run.

use html5ever::tendril::TendrilSink;
use std::time::{Duration, Instant};

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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `work` for about `budget`, at least 20 times; returns the sorted durations.
fn measure(budget: Duration, mut work: impl FnMut()) -> Vec<Duration> {
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 20 || started.elapsed() < budget {
        let t = Instant::now();
        work();
        times.push(t.elapsed());
    }
    times.sort();
    times
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("BENCH_MILLIS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    );
    let inputs = [("small", page(1)), ("medium", page(31)), ("large", page(3050))];
    let options = kubedav_markdown::Options::default();
    println!(
        "{:<8} {:>9} {:<8} {:>9} {:>10} {:>10}",
        "input", "bytes", "engine", "MB/s", "p50", "p99"
    );
    for (name, html) in &inputs {
        let bytes = html.len();
        for engine in ["kubedav", "htmd", "parse only"] {
            let times = match engine {
                "kubedav" => measure(budget, || {
                    std::hint::black_box(
                        kubedav_markdown::convert(html.as_bytes(), "text/html", &options).unwrap(),
                    );
                }),
                "htmd" => measure(budget, || {
                    std::hint::black_box(htmd::convert(html).unwrap());
                }),
                _ => measure(budget, || {
                    let dom =
                        html5ever::parse_document(markup5ever_rcdom::RcDom::default(), Default::default())
                            .one(html.as_str());
                    std::hint::black_box(dom);
                }),
            };
            let p50 = percentile(&times, 0.5);
            let mbs = bytes as f64 / 1e6 / p50.as_secs_f64();
            println!(
                "{name:<8} {bytes:>9} {engine:<8} {mbs:>9.1} {:>10.3?} {:>10.3?}",
                p50,
                percentile(&times, 0.99)
            );
        }
    }
    println!("(\"parse only\" is html5ever building the DOM; kubedav's rendering is the rest of its time)");
}
