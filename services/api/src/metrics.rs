//! Metric names every target shares, defined once: in all-in-one mode every crate
//! registers into one process's registry, where a name can be registered only once.
//! Every service crate depends on this one, so the definitions live here.
/// `kubedav_cache_lookups_total{cache, result}`: every cache of every target under one
/// name. `cache` names it (`auth`, `auth_shared`, `fileio_file`, `fileio_name`,
/// `fileio_property`, `gateway_file`, `gateway_resource`, `gateway_listing`,
/// `gateway_locks`, `markdown`); `result` is `hit`, `miss`, or for a remote cache
/// `error`. Keep the counter returned: the label lookup hashes and takes a lock.
pub fn cache_lookups(cache: &str, result: &str) -> prometheus::IntCounter {
    static LOOKUPS: std::sync::LazyLock<prometheus::IntCounterVec> = std::sync::LazyLock::new(|| {
        prometheus::register_int_counter_vec!(
            "kubedav_cache_lookups_total",
            "Cache lookups by cache and result (hit, miss; error when a remote cache fails).",
            &["cache", "result"]
        )
        .expect("metric registers once")
    });
    LOOKUPS.with_label_values(&[cache, result])
}

/// `kubedav_cache_stores_total{cache}`: entries written to a cache that other processes
/// read (the auth replicas' shared cache on Redis).
pub fn cache_stores(cache: &str) -> prometheus::IntCounter {
    static STORES: std::sync::LazyLock<prometheus::IntCounterVec> = std::sync::LazyLock::new(|| {
        prometheus::register_int_counter_vec!(
            "kubedav_cache_stores_total",
            "Entries stored in a cache shared with other processes, by cache.",
            &["cache"]
        )
        .expect("metric registers once")
    });
    STORES.with_label_values(&[cache])
}
