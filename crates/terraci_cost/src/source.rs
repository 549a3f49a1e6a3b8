//! Where prices come from: a directory of price files (`--pricing-dir`, for runners
//! without network), else the per-user cache, else AWS's public price list over HTTP.
//!
//! Input: a service code and a region. Output: its [`PriceIndex`] (the products terraci
//! can price, see `resources::keeps`), or why there is none. A download is kept in
//! `<cache home>/<namespace>/<service>/<region>.json` (outside the checkout, which a merge
//! request writes) and used until it is older than the TTL; a cache file that does not
//! parse is fetched again. Every index is read once a run.

use std::collections::BTreeMap;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use terraci_db::system::System;

use crate::offer::{parse_offer, PriceIndex};
use crate::resources::keeps;

/// AWS's public price list (no credentials).
pub const DEFAULT_BASE_URL: &str = "https://pricing.us-east-1.amazonaws.com";

/// The largest price file read: the EC2 file of the largest region is under 1 GiB.
pub const MAX_PRICE_FILE: u64 = 1 << 30;

/// How long a downloaded price list is used, unless the config says (TerraCi's 24 h).
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// The path of a price file under a base URL or `--pricing-dir`: AWS's own layout.
pub fn offer_path(service: &str, region: &str) -> String {
    format!("offers/v1.0/aws/{service}/current/{region}/index.json")
}

/// Where prices are read from.
pub enum Origin {
    /// `--pricing-dir`: files in AWS's layout ([`offer_path`]); nothing is fetched.
    Dir(Utf8PathBuf),
    /// Over HTTP from `base_url`, cached in `cache` (when there is a cache home).
    Http {
        base_url: String,
        cache: Option<Utf8PathBuf>,
        ttl: Duration,
    },
}

/// The price lists of a run, each read at most once.
pub struct Prices<'a> {
    system: &'a dyn System,
    origin: Origin,
    read: BTreeMap<(String, String), Result<PriceIndex, String>>,
    /// Where each list came from, for `-v` (the cache file, the URL, the path read).
    pub provenance: BTreeMap<(String, String), String>,
}

impl<'a> Prices<'a> {
    pub fn new(system: &'a dyn System, origin: Origin) -> Prices<'a> {
        Prices {
            system,
            origin,
            read: BTreeMap::new(),
            provenance: BTreeMap::new(),
        }
    }

    /// The index of `service` in `region`. Both name a file below the price directory or
    /// the per-user cache and a URL path: a name that is not a service's or a region's
    /// (a plan is the checkout's: `../..` in its region) is refused before anything is
    /// read, fetched or written. (`global`: the list of a service without regions.)
    pub fn index(&mut self, service: &str, region: &str) -> Result<&PriceIndex, String> {
        let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
        let region_name =
            region == crate::resources::GLOBAL || crate::plan::looks_like_region(region);
        if !plain(service) || !region_name {
            return Err(format!(
                "`{}` in `{}` names no price list: not a service and an AWS region name",
                terraci_db::escape::printable(service),
                terraci_db::escape::printable(region)
            ));
        }
        let key = (service.to_owned(), region.to_owned());
        if !self.read.contains_key(&key) {
            let (result, from) = self.load(service, region);
            if let Some(from) = from {
                self.provenance.insert(key.clone(), from);
            }
            self.read.insert(key.clone(), result);
        }
        match self.read.get(&key) {
            Some(Ok(index)) => Ok(index),
            Some(Err(e)) => Err(e.clone()),
            None => Err("not read".to_owned()),
        }
    }

    fn load(&self, service: &str, region: &str) -> (Result<PriceIndex, String>, Option<String>) {
        let keep = |family: &str, attributes: &BTreeMap<String, String>| {
            keeps(service, family, attributes)
        };
        match &self.origin {
            Origin::Dir(dir) => {
                let path = dir.join(offer_path(service, region));
                let result = self
                    .system
                    .read_regular(&path, MAX_PRICE_FILE)
                    .map_err(|e| format!("cannot read {path}: {e}"))
                    .and_then(|bytes| {
                        parse_offer(bytes.as_slice(), service, region, &keep)
                            .map_err(|e| format!("{path}: {e}"))
                    });
                (result, Some(path.to_string()))
            }
            Origin::Http {
                base_url,
                cache,
                ttl,
            } => {
                let cached = cache.as_ref().map(|c| cache_file(c, service, region));
                if let Some((path, index)) = cached
                    .as_deref()
                    .and_then(|p| Some((p, self.fresh(p, *ttl)?)))
                {
                    return (Ok(index), Some(format!("cached in {path}")));
                }
                let url = format!(
                    "{}/{}",
                    base_url.trim_end_matches('/'),
                    offer_path(service, region)
                );
                let result = terraci_ext::http::get_streamed(&url, MAX_PRICE_FILE, |body| {
                    parse_offer(body, service, region, &keep).map_err(|e| e.to_string())
                });
                let result = result.map(|mut index| {
                    index.fetched = self.seconds_now();
                    if let Some(path) = &cached {
                        // Best effort: a run without a writable cache still prices.
                        if let Ok(text) = serde_json::to_vec(&index) {
                            if let Some(parent) = path.parent() {
                                let _ = self.system.create_dir_all(parent);
                            }
                            let _ = self.system.write_atomic(path, &text);
                        }
                    }
                    index
                });
                (
                    result,
                    Some(format!(
                        "downloaded from {}",
                        terraci_ext::http::redact_url(&url)
                    )),
                )
            }
        }
    }

    /// The cached index at `path` if it parses and is younger than `ttl`.
    fn fresh(&self, path: &Utf8Path, ttl: Duration) -> Option<PriceIndex> {
        let bytes = self.system.read_regular(path, MAX_PRICE_FILE).ok()?;
        let index: PriceIndex = serde_json::from_slice(&bytes).ok()?;
        let age = self.seconds_now().checked_sub(index.fetched)?;
        (age < ttl.as_secs()).then_some(index)
    }

    fn seconds_now(&self) -> u64 {
        self.system
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}

/// The cache file of one price list under the cache directory.
pub fn cache_file(cache: &Utf8Path, service: &str, region: &str) -> Utf8PathBuf {
    cache.join(service).join(format!("{region}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_or_service_that_is_not_a_name_reads_and_fetches_nothing() {
        let system = terraci_db::system::MemorySystem::new();
        let mut prices = Prices::new(&system, Origin::Dir("/prices".into()));
        for (service, region) in [
            ("AmazonEC2", "../../etc"),
            ("AmazonEC2", "eu-west-1/../../x"),
            ("../AmazonEC2", "eu-west-1"),
            ("AmazonEC2", ""),
        ] {
            let err = prices
                .index(service, region)
                .map(|_| ())
                .expect_err("refused");
            assert!(err.contains("names no price list"), "{err}");
        }
        assert_eq!(
            system.take_reads(),
            Vec::<Utf8PathBuf>::new(),
            "nothing read"
        );
        let err = prices
            .index("AmazonEC2", "eu-west-1")
            .map(|_| ())
            .expect_err("no such file");
        assert!(
            err.contains("/prices/offers/v1.0/aws/AmazonEC2/current/eu-west-1/index.json"),
            "{err}"
        );
    }
}
