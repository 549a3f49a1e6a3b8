//! AWS's bulk price list files ("offer files"), read as a stream.
//!
//! Input: the bytes of `offers/v1.0/aws/<service>/current/<region>/index.json` (from the
//! network, the cache or `--pricing-dir`), and which products to keep. Output: a
//! [`PriceIndex`]: for each kept product its SKU, product family, attributes and the
//! on-demand price in USD of its first paid tier.
//!
//! The EC2 file of one region is hundreds of MB, almost all of it products and reserved
//! terms terraci never prices (Windows, dedicated hosts, reservations). The parser walks
//! the document once: a product is kept only if the service's filter wants it, reserved
//! terms and unwanted SKUs' on-demand terms are skipped without being built, so memory is
//! about the kept products, not the file. AWS writes `products` before `terms`; a file
//! in the other order still parses (every on-demand term is then kept until the end).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// One priced product: what an estimate multiplies by a quantity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    pub sku: String,
    pub family: String,
    pub attributes: BTreeMap<String, String>,
    /// USD per `unit`, as the file writes it (`"0.0104000000"`).
    pub price: String,
    /// `Hrs`, `GB-Mo`, `Requests`, `Lambda-GB-Second`...
    pub unit: String,
}

impl Product {
    /// The price as a number (a file whose price does not parse was refused on reading).
    pub fn usd(&self) -> f64 {
        self.price.parse().unwrap_or(0.0)
    }
}

/// The kept products of one service in one region, sorted by SKU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceIndex {
    pub service: String,
    pub region: String,
    /// When it was downloaded, in seconds since the epoch (0 for a `--pricing-dir` file).
    #[serde(default)]
    pub fetched: u64,
    pub products: Vec<Product>,
}

/// How one attribute must match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    Is(String),
    /// Usage types carry a region prefix outside us-east-1 (`EUC1-NatGateway-Hours`).
    EndsWith(String),
}

impl Match {
    fn matches(&self, value: &str) -> bool {
        match self {
            Match::Is(v) => value == v,
            Match::EndsWith(v) => value.ends_with(v.as_str()),
        }
    }
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Is(v) => write!(f, "{v:?}"),
            Match::EndsWith(v) => write!(f, "*{v:?}"),
        }
    }
}

impl PriceIndex {
    /// The product of `family` (any, when empty) whose attributes match every filter; of
    /// several, the one with the lowest SKU (the files list one per combination, so
    /// several means a filter the resource could not narrow: the choice must at least be
    /// stable).
    pub fn find(&self, family: &str, filters: &[(&str, Match)]) -> Option<&Product> {
        self.products.iter().find(|p| {
            (family.is_empty() || p.family == family)
                && filters.iter().all(|(name, m)| {
                    p.attributes
                        .get(*name)
                        .is_some_and(|value| m.matches(value))
                })
        })
    }
}

/// Why a price file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// Not JSON, or not an offer file: the message has the line and column.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// Which products of a file are kept: `(product family, attributes)`.
pub type Keep<'a> = &'a dyn Fn(&str, &BTreeMap<String, String>) -> bool;

/// Parses an offer file from `reader`, keeping the products `keep` wants that have an
/// on-demand price.
pub fn parse_offer(
    reader: impl std::io::Read,
    service: &str,
    region: &str,
    keep: Keep<'_>,
) -> Result<PriceIndex, OfferError> {
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
    let parsed = OfferSeed { keep }.deserialize(&mut de)?;
    de.end()?;
    let mut products = Vec::new();
    for (sku, raw) in parsed.products {
        if let Some((price, unit)) = parsed.prices.get(&sku) {
            products.push(Product {
                sku,
                family: raw.family,
                attributes: raw.attributes,
                price: price.clone(),
                unit: unit.clone(),
            });
        }
    }
    Ok(PriceIndex {
        service: service.to_owned(),
        region: region.to_owned(),
        fetched: 0,
        products,
    })
}

#[derive(Deserialize)]
struct RawProduct {
    #[serde(rename = "productFamily", default)]
    family: String,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

struct Parsed {
    products: BTreeMap<String, RawProduct>,
    /// SKU -> (USD per unit, unit).
    prices: BTreeMap<String, (String, String)>,
}

struct OfferSeed<'a> {
    keep: Keep<'a>,
}

impl<'de> DeserializeSeed<'de> for OfferSeed<'_> {
    type Value = Parsed;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OfferSeed<'_> {
    type Value = Parsed;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AWS price list (an object with `products` and `terms`)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut products: Option<BTreeMap<String, RawProduct>> = None;
        let mut prices = BTreeMap::new();
        let mut saw_terms = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "products" => {
                    products = Some(map.next_value_seed(ProductsSeed { keep: self.keep })?);
                }
                "terms" => {
                    saw_terms = true;
                    let wanted = products.as_ref().map(|p| p.keys().cloned().collect());
                    prices = map.next_value_seed(TermsSeed { wanted })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let products = products.ok_or_else(|| de::Error::missing_field("products"))?;
        if !saw_terms {
            return Err(de::Error::missing_field("terms"));
        }
        Ok(Parsed { products, prices })
    }
}

struct ProductsSeed<'a> {
    keep: Keep<'a>,
}

impl<'de> DeserializeSeed<'de> for ProductsSeed<'_> {
    type Value = BTreeMap<String, RawProduct>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ProductsSeed<'_> {
    type Value = BTreeMap<String, RawProduct>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`products`: an object of products by SKU")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(sku) = map.next_key::<String>()? {
            let product: RawProduct = map.next_value()?;
            if (self.keep)(&product.family, &product.attributes) {
                out.insert(sku, product);
            }
        }
        Ok(out)
    }
}

struct TermsSeed {
    /// The kept SKUs, when the products came first.
    wanted: Option<BTreeSet<String>>,
}

impl<'de> DeserializeSeed<'de> for TermsSeed {
    type Value = BTreeMap<String, (String, String)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TermsSeed {
    type Value = BTreeMap<String, (String, String)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`terms`: an object with `OnDemand`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "OnDemand" {
                out = map.next_value_seed(OnDemandSeed {
                    wanted: self.wanted.as_ref(),
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

struct OnDemandSeed<'a> {
    wanted: Option<&'a BTreeSet<String>>,
}

impl<'de> DeserializeSeed<'de> for OnDemandSeed<'_> {
    type Value = BTreeMap<String, (String, String)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions")]
    dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize)]
struct Dimension {
    #[serde(default)]
    unit: String,
    #[serde(rename = "pricePerUnit")]
    price_per_unit: BTreeMap<String, String>,
    #[serde(rename = "beginRange", default)]
    begin_range: String,
}

impl<'de> Visitor<'de> for OnDemandSeed<'_> {
    type Value = BTreeMap<String, (String, String)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`terms.OnDemand`: an object of terms by SKU")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(sku) = map.next_key::<String>()? {
            if self.wanted.is_some_and(|w| !w.contains(&sku)) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let terms: BTreeMap<String, Term> = map.next_value()?;
            if let Some(price) = first_paid_tier(&terms).map_err(de::Error::custom)? {
                out.insert(sku, price);
            }
        }
        Ok(out)
    }
}

/// The USD price of the lowest tier that costs something (a free tier first, as
/// DynamoDB's and Lambda's have, is not what a month beyond it costs), and its unit.
fn first_paid_tier(terms: &BTreeMap<String, Term>) -> Result<Option<(String, String)>, String> {
    let mut best: Option<(f64, String, String)> = None;
    for term in terms.values() {
        for dim in term.dimensions.values() {
            let Some(usd) = dim.price_per_unit.get("USD") else {
                continue;
            };
            let value: f64 = usd
                .parse()
                .map_err(|_| format!("pricePerUnit.USD {usd:?} is not a number"))?;
            if value <= 0.0 {
                continue;
            }
            let begin: f64 = dim.begin_range.parse().unwrap_or(0.0);
            if best.as_ref().is_none_or(|(b, _, _)| begin < *b) {
                best = Some((begin, usd.clone(), dim.unit.clone()));
            }
        }
    }
    Ok(best.map(|(_, price, unit)| (price, unit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = r#"{
      "formatVersion": "v1.0", "offerCode": "AmazonEKS", "version": "20260101000000",
      "products": {
        "AAA": {"sku": "AAA", "productFamily": "Compute",
                "attributes": {"regionCode": "us-east-1", "usagetype": "USE1-AmazonEKS-Hours:perCluster"}},
        "BBB": {"sku": "BBB", "productFamily": "Compute",
                "attributes": {"regionCode": "us-east-1", "usagetype": "USE1-AmazonEKS-Hours:perFargate"}}
      },
      "terms": {
        "OnDemand": {
          "AAA": {"AAA.T": {"sku": "AAA", "priceDimensions": {
            "AAA.T.D": {"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "pricePerUnit": {"USD": "0.1000000000"}}}}},
          "BBB": {"BBB.T": {"sku": "BBB", "priceDimensions": {
            "BBB.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": "oops"}}}}}
        },
        "Reserved": {"AAA": {"whatever": [1, 2, 3]}}
      }
    }"#;

    #[test]
    fn keeps_only_wanted_products_and_skips_the_terms_of_the_others() {
        let keep = |_: &str, a: &BTreeMap<String, String>| {
            a.get("usagetype")
                .is_some_and(|u| u.ends_with("perCluster"))
        };
        // BBB's unparsable price is never read: its terms are skipped.
        let index = parse_offer(OFFER.as_bytes(), "AmazonEKS", "us-east-1", &keep).expect("parses");
        assert_eq!(index.products.len(), 1);
        let p = index
            .find(
                "Compute",
                &[(
                    "usagetype",
                    Match::EndsWith("-AmazonEKS-Hours:perCluster".into()),
                )],
            )
            .expect("found");
        assert_eq!(
            (p.sku.as_str(), p.price.as_str(), p.unit.as_str()),
            ("AAA", "0.1000000000", "Hrs")
        );
    }

    #[test]
    fn a_bad_price_of_a_kept_product_is_an_error_with_its_place() {
        let keep = |_: &str, _: &BTreeMap<String, String>| true;
        let err =
            parse_offer(OFFER.as_bytes(), "AmazonEKS", "us-east-1", &keep).expect_err("bad price");
        assert!(
            err.to_string().contains("\"oops\" is not a number"),
            "{err}"
        );
        assert!(err.to_string().contains("line "), "{err}");
    }

    #[test]
    fn a_document_that_is_not_an_offer_says_what_is_missing() {
        let keep = |_: &str, _: &BTreeMap<String, String>| true;
        let err = parse_offer(&b"{\"terms\": {}}"[..], "s", "r", &keep).expect_err("no products");
        assert!(err.to_string().contains("products"), "{err}");
        let err = parse_offer(&b"[1]"[..], "s", "r", &keep).expect_err("not an object");
        assert!(err.to_string().contains("AWS price list"), "{err}");
    }

    #[test]
    fn the_first_paid_tier_is_the_price() {
        let offer = r#"{"products": {"S": {"productFamily": "Provisioned IOPS", "attributes": {"group": "DDB-ReadUnits"}}},
          "terms": {"OnDemand": {"S": {"S.T": {"priceDimensions": {
            "a": {"unit": "ReadCapacityUnit-Hrs", "beginRange": "0", "pricePerUnit": {"USD": "0.0000000000"}},
            "b": {"unit": "ReadCapacityUnit-Hrs", "beginRange": "18600", "pricePerUnit": {"USD": "0.0001300000"}}}}}}}}"#;
        let keep = |_: &str, _: &BTreeMap<String, String>| true;
        let index =
            parse_offer(offer.as_bytes(), "AmazonDynamoDB", "us-east-1", &keep).expect("parses");
        assert_eq!(index.products[0].price, "0.0001300000");
    }
}
