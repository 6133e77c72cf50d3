//! Every input of every committed fuzz corpus still holds its target's properties: the
//! regression half of fuzzing, in `make test` (exploring new inputs is `make fuzz`).

use std::path::Path;

#[test]
fn every_corpus_input_holds_its_properties() {
    let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut failures = Vec::new();
    // Each failure is reported once below, with its input's name, not as a backtrace.
    std::panic::set_hook(Box::new(|_| {}));
    for (target, check) in kubedav_fuzz_checks::TARGETS {
        let dir = corpora.join(target);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        assert!(
            !inputs.is_empty(),
            "{}: an empty corpus checks nothing",
            dir.display()
        );
        for input in &inputs {
            let data = std::fs::read(input).unwrap();
            if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic");
                failures.push(format!("{}: {why}", input.display()));
            }
        }
        println!("{target}: {} inputs", inputs.len());
    }
    drop(std::panic::take_hook());
    assert!(
        failures.is_empty(),
        "inputs that break their target's properties (reproduce with \
         `cargo +nightly fuzz run -O --fuzz-dir services/fuzz TARGET FILE`):\n{}",
        failures.join("\n")
    );
}
