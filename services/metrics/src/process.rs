//! The standard `process_*` metrics of every Prometheus client, read from `/proc` at each
//! scrape: CPU time, resident and virtual memory, open and allowed file descriptors, and
//! the start time (the names and meanings of client_golang's process collector).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Writes the `process_*` metrics of this process.
#[derive(Debug)]
pub(super) struct ProcessCollector;

/// What `/proc/self/stat` says of this process.
struct Stat {
    cpu_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
    start_seconds_after_boot: f64,
}

fn read_stat() -> Option<Stat> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces: fields start after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // Field N of proc(5) is fields[N - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    Some(Stat {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        start_seconds_after_boot: field(22)? as f64 / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)?.saturating_mul(rustix::param::page_size() as u64),
    })
}

/// The machine's boot time, in seconds since the epoch (`btime` of `/proc/stat`).
fn boot_time() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn open_fds() -> Option<i64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as i64)
}

fn max_fds() -> Option<i64> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.current.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn gauge<V>(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: V) -> Result<(), std::fmt::Error>
where
    ConstGauge<V>: EncodeMetric,
{
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(stat) = read_stat() {
            let cpu = ConstCounter::new(stat.cpu_seconds);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.resident_bytes as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.virtual_bytes as f64,
            )?;
            if let Some(boot) = boot_time() {
                gauge(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot + stat.start_seconds_after_boot,
                )?;
            }
        }
        if let Some(open) = open_fds() {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                open,
            )?;
        }
        if let Some(max) = max_fds() {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max,
            )?;
        }
        Ok(())
    }
}
