//! Durations as TerraCi's config and flags write them (Go's `time.ParseDuration`):
//! `extensions.cost.cache_ttl`, `tfupdate --timeout`.

use std::time::Duration;

/// A duration as TerraCi writes it (Go's `time.ParseDuration`: `24h`, `90m`, `1h30m`,
/// `3600s`); `None` when it is not one, or not positive.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * seconds;
    }
    (total > 0.0 && total.is_finite()).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(parse_go_duration("24h"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_go_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5_400)));
        assert_eq!(parse_go_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("12"), None);
        assert_eq!(parse_go_duration("m"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("invalid-duration"), None);
        assert_eq!(parse_go_duration("0h"), None);
    }
}
