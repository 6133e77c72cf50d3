//! The process's one metrics registry, on `prometheus-client` (the Prometheus project's
//! own Rust client), and the metric names every target shares.
//!
//! In all-in-one mode every crate registers into one process's registry, where a name
//! may appear only once; every service crate depends on this one, so the registry and
//! the shared definitions live here. A metric is registered when it is made, so make
//! each one once (a `LazyLock` static) and keep the handles: a labelled child looked up
//! with [`CounterFamily::with_label_values`] hashes its labels and takes a lock.
//!
//! [`encode`] writes the registry in the OpenMetrics text format (with exemplars: the
//! trace ids on [`TracedHistogramFamily`]) for scrapers that ask for it, and in the
//! Prometheus text format 0.0.4 (without exemplars) for everyone else.

#![forbid(unsafe_code)]

mod process;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text as openmetrics;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::registry::{Metric, Registry};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// A monotonic counter (`u64`); the exported name ends in `_total`.
pub type Counter = prometheus_client::metrics::counter::Counter;
/// A gauge (`i64`).
pub type Gauge = prometheus_client::metrics::gauge::Gauge;
/// A histogram with fixed buckets.
pub type Histogram = prometheus_client::metrics::histogram::Histogram;

/// A child's labels: the family's label names with this child's values.
type Labels = Vec<(&'static str, String)>;
/// The one label an exemplar carries: the trace the observation belongs to.
type TraceLabel = [(&'static str, String); 1];

/// `Content-Type` of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of the Prometheus text format, version 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(process::ProcessCollector));
    Mutex::new(registry)
});

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while registering leaves the registry as it was: keep using it.
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers `metric` under `name`. prometheus-client appends `_total` to counters and a
/// full stop to help texts itself, so both are taken off here: call sites spell the
/// exported name.
fn register(name: &str, help: &str, metric: impl Metric) {
    let name = name.strip_suffix("_total").unwrap_or(name);
    let help = help.strip_suffix('.').unwrap_or(help);
    registry().register(name, help, metric);
}

/// Registers `collector`, which writes its metrics itself at every scrape.
pub fn register_collector(collector: Box<dyn Collector>) {
    registry().register_collector(collector);
}

/// Gauges whose values `read` gives at every scrape, as `(name, help, value)`; `read`
/// may leave any out (when it cannot tell).
pub fn register_scraped_gauges(
    read: impl Fn() -> Vec<(&'static str, &'static str, i64)> + Send + Sync + 'static,
) {
    register_collector(Box::new(ScrapedGauges(Box::new(read))));
}

type ReadGauges = Box<dyn Fn() -> Vec<(&'static str, &'static str, i64)> + Send + Sync>;

/// The collector behind [`register_scraped_gauges`].
struct ScrapedGauges(ReadGauges);

impl std::fmt::Debug for ScrapedGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScrapedGauges")
    }
}

impl Collector for ScrapedGauges {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        for (name, help, value) in (self.0)() {
            let gauge = prometheus_client::metrics::gauge::ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// The registry in the OpenMetrics text format (exemplars included, `# EOF` last) when
/// `openmetrics`, else in the Prometheus text format 0.0.4.
pub fn encode(openmetrics: bool) -> Result<String, std::fmt::Error> {
    let mut body = String::with_capacity(64 * 1024);
    let registry = registry();
    if openmetrics {
        openmetrics::encode(&mut body, &registry)?;
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut body, &registry)?;
    }
    Ok(body)
}

/// Whether an `Accept` header value asks for OpenMetrics (Prometheus asks for it first).
pub fn wants_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        range
            .split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/openmetrics-text"))
    })
}

/// A registered counter without labels.
pub fn counter(name: &str, help: &str) -> Counter {
    let counter = Counter::default();
    register(name, help, counter.clone());
    counter
}

/// A registered gauge without labels.
pub fn gauge(name: &str, help: &str) -> Gauge {
    let gauge = Gauge::default();
    register(name, help, gauge.clone());
    gauge
}

/// A registered histogram without labels, with upper bounds `buckets`.
pub fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    let histogram = Histogram::new(buckets.iter().copied());
    register(name, help, histogram.clone());
    histogram
}

/// `count` bucket bounds from `start`, each `factor` times the one before.
pub fn exponential_buckets(start: f64, factor: f64, count: u16) -> Vec<f64> {
    prometheus_client::metrics::histogram::exponential_buckets(start, factor, count).collect()
}

/// Pairs a family's label names with one child's values.
fn labels(names: &'static [&'static str], values: &[&str]) -> Labels {
    debug_assert_eq!(names.len(), values.len(), "one value per label");
    names
        .iter()
        .zip(values)
        .map(|(name, value)| (*name, (*value).to_owned()))
        .collect()
}

/// Makes a family's histograms with its buckets.
#[derive(Clone, Debug)]
pub struct Buckets(Vec<f64>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

impl MetricConstructor<HistogramWithExemplars<TraceLabel>> for Buckets {
    fn new_metric(&self) -> HistogramWithExemplars<TraceLabel> {
        HistogramWithExemplars::new(self.0.iter().copied())
    }
}

/// A family of metrics with labels: one child per set of label values, each made (and
/// exported at zero) on first use.
#[derive(Clone, Debug)]
pub struct Labelled<M, C = fn() -> M> {
    names: &'static [&'static str],
    family: Family<Labels, M, C>,
}

impl<M: Clone, C: MetricConstructor<M>> Labelled<M, C> {
    /// The child with `values` (one per label name, in order).
    pub fn with_label_values(&self, values: &[&str]) -> M {
        self.family.get_or_create_owned(&labels(self.names, values))
    }

    /// Drops every child (a gauge family set anew from a fresh count, whose label
    /// values that are gone must go too).
    pub fn clear(&self) {
        self.family.clear();
    }
}

impl<M> Labelled<M>
where
    M: Default + Clone,
    Family<Labels, M>: Metric,
{
    /// Registers the family `name` with the label names `names`.
    pub fn new(name: &str, help: &str, names: &'static [&'static str]) -> Self {
        let family = Family::default();
        register(name, help, family.clone());
        Self { names, family }
    }
}

impl<M> Labelled<M, Buckets>
where
    M: Clone,
    Family<Labels, M, Buckets>: Metric,
{
    /// Registers the family `name` with the label names `names` and upper bounds `buckets`.
    pub fn new(name: &str, help: &str, names: &'static [&'static str], buckets: &[f64]) -> Self {
        let family = Family::new_with_constructor(Buckets(buckets.to_vec()));
        register(name, help, family.clone());
        Self { names, family }
    }
}

/// Counters with labels.
pub type CounterFamily = Labelled<Counter>;
/// Gauges with labels.
pub type GaugeFamily = Labelled<Gauge>;
/// Histograms with labels, all with the same buckets.
pub type HistogramFamily = Labelled<Histogram, Buckets>;

/// Histograms with labels whose buckets keep an exemplar: the last observation that fell
/// in them with the id of its trace, so a dashboard can jump from a slow bucket to a
/// trace. Exemplars are exported only in the OpenMetrics format.
#[derive(Clone, Debug)]
pub struct TracedHistogramFamily(Labelled<HistogramWithExemplars<TraceLabel>, Buckets>);

impl TracedHistogramFamily {
    /// Registers the family `name` with the label names `names` and upper bounds `buckets`.
    pub fn new(name: &str, help: &str, names: &'static [&'static str], buckets: &[f64]) -> Self {
        Self(Labelled::<HistogramWithExemplars<TraceLabel>, Buckets>::new(
            name, help, names, buckets,
        ))
    }

    /// The child with `values` (one per label name, in order).
    pub fn with_label_values(&self, values: &[&str]) -> TracedHistogram {
        TracedHistogram(self.0.with_label_values(values))
    }
}

/// One child of a [`TracedHistogramFamily`].
#[derive(Clone, Debug)]
pub struct TracedHistogram(HistogramWithExemplars<TraceLabel>);

impl TracedHistogram {
    /// Records `value`; with `trace_id` (32 lowercase hex digits of a sampled trace) it
    /// becomes its bucket's exemplar.
    pub fn observe(&self, value: f64, trace_id: Option<String>) {
        self.0.observe(value, trace_id.map(|id| [("trace_id", id)]), None);
    }
}

/// Metric names every target shares.
mod shared {
    use super::{Counter, CounterFamily};
    use std::sync::LazyLock;

    static LOOKUPS: LazyLock<CounterFamily> = LazyLock::new(|| {
        CounterFamily::new(
            "kubedav_cache_lookups_total",
            "Cache lookups by cache and result (hit, miss; error when a remote cache fails).",
            &["cache", "result"],
        )
    });
    static STORES: LazyLock<CounterFamily> = LazyLock::new(|| {
        CounterFamily::new(
            "kubedav_cache_stores_total",
            "Entries stored in a cache shared with other processes, by cache.",
            &["cache"],
        )
    });

    /// `kubedav_cache_lookups_total{cache, result}`: every cache of every target under one
    /// name. `cache` names it (`auth`, `auth_shared`, `fileio_file`, `fileio_name`,
    /// `fileio_property`, `gateway_file`, `gateway_resource`, `gateway_listing`, `gateway_answer`,
    /// `gateway_locks`, `gateway_write_check`, `gateway_release`, `markdown`); `result` is `hit`, `miss`, or for a remote cache
    /// `error`. Keep the counter returned: the label lookup hashes and takes a lock.
    pub fn cache_lookups(cache: &str, result: &str) -> Counter {
        LOOKUPS.with_label_values(&[cache, result])
    }

    /// `kubedav_cache_stores_total{cache}`: entries written to a cache that other processes
    /// read (the auth replicas' shared cache on Redis).
    pub fn cache_stores(cache: &str) -> Counter {
        STORES.with_label_values(&[cache])
    }
}

pub use shared::{cache_lookups, cache_stores};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_exported_once_with_total_and_exemplars_only_in_openmetrics() {
        let requests = CounterFamily::new("kubedav_test_requests_total", "Requests.", &["code"]);
        requests.with_label_values(&["404"]).inc();
        let duration =
            TracedHistogramFamily::new("kubedav_test_duration_seconds", "Time.", &["method"], &[0.1, 1.0]);
        duration
            .with_label_values(&["GET"])
            .observe(0.05, Some("0af7651916cd43dd8448eb211c80319c".into()));

        let text = encode(false).unwrap();
        assert!(
            text.contains("# TYPE kubedav_test_requests_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("kubedav_test_requests_total{code=\"404\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP kubedav_test_requests_total Requests.\n"),
            "{text}"
        );
        assert!(!text.contains("trace_id"), "0.0.4 has no exemplars: {text}");
        assert!(!text.contains("# EOF"));

        let open = encode(true).unwrap();
        assert!(open.ends_with("# EOF\n"));
        let bucket = open
            .lines()
            .find(|l| {
                l.starts_with("kubedav_test_duration_seconds_bucket{le=\"0.1\",method=\"GET\"}")
                    || l.starts_with("kubedav_test_duration_seconds_bucket{method=\"GET\",le=\"0.1\"}")
            })
            .unwrap_or_else(|| panic!("no 0.1 bucket: {open}"));
        assert!(
            bucket.contains("# {trace_id=\"0af7651916cd43dd8448eb211c80319c\"} 0.05"),
            "{bucket}"
        );
    }

    #[test]
    fn process_metrics_are_exported() {
        let text = encode(false).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(text.contains(name), "{name} missing: {text}");
        }
    }

    #[test]
    fn openmetrics_is_served_to_those_who_ask_for_it() {
        assert!(wants_openmetrics(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
    }
}
