//! Converts a file in a loop, for a profiler: `profile_convert FILE [ROUNDS]`.
fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a file");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(200);
    let html = std::fs::read(path).expect("readable");
    let options = kubedav_markdown::Options::default();
    let mut total = 0;
    for _ in 0..rounds {
        total += kubedav_markdown::convert(&html, "text/html", &options)
            .expect("converts")
            .markdown
            .len();
    }
    println!("{total}");
}
