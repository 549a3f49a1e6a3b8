//! IP network functions: `cidrhost`, `cidrnetmask`, `cidrsubnet`, `cidrsubnets`.
//!
//! Terraform parses prefixes with a copy of Go 1.16's `net.ParseCIDR` (IPv4 octets may have
//! leading zeros and are read as decimal) and computes with `go-cidr`; the arithmetic here
//! follows both, addresses held as `u128` with their width (32 or 128 bits).

use super::Args;
use crate::eval::evaluator::{Evaluator, R};
use crate::eval::value::Value;

/// A parsed `addr/len`, with the address already masked to the network (as `ParseCIDR`).
#[derive(Clone, Copy)]
struct Net {
    ip: u128,
    len: u32,
    /// 32 for IPv4, 128 for IPv6.
    bits: u32,
}

fn ones(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// The network mask of `len` bits in an address of `bits` bits.
fn mask(len: u32, bits: u32) -> u128 {
    ones(bits) & !ones(bits - len.min(bits))
}

impl Net {
    fn last(self) -> u128 {
        self.ip | ones(self.bits - self.len)
    }

    fn contains(self, ip: u128) -> bool {
        ip & mask(self.len, self.bits) == self.ip
    }
}

/// Go 1.16's IPv4 parser: four decimal parts of at most 255, leading zeros allowed.
fn parse_ipv4(s: &str) -> Option<u128> {
    let mut ip = 0u128;
    let mut parts = 0;
    for part in s.split('.') {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) || part.len() > 8 {
            return None;
        }
        let n: u32 = part.parse().ok()?;
        if n > 255 {
            return None;
        }
        ip = ip << 8 | u128::from(n);
        parts += 1;
    }
    (parts == 4).then_some(ip)
}

fn parse_cidr(s: &str) -> Result<Net, String> {
    let bad = || format!("invalid CIDR address: {s}");
    let (addr, len) = s.split_once('/').ok_or_else(bad)?;
    let (ip, bits) = match parse_ipv4(addr) {
        Some(ip) => (ip, 32),
        None => {
            let ip: std::net::Ipv6Addr = addr.parse().map_err(|_| bad())?;
            (u128::from(ip), 128)
        }
    };
    if len.is_empty() || len.len() > 8 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let len: u32 = len.parse().map_err(|_| bad())?;
    if len > bits {
        return Err(bad());
    }
    Ok(Net {
        ip: ip & mask(len, bits),
        len,
        bits,
    })
}

/// Go's `net.IP.String`: dotted IPv4 (also for IPv4-mapped IPv6), else RFC 5952.
fn format_ip(ip: u128, bits: u32) -> String {
    if bits == 32 || ip >> 32 == 0xffff {
        let v4 = std::net::Ipv4Addr::from((ip & 0xffff_ffff) as u32);
        return v4.to_string();
    }
    let groups: Vec<u16> = (0..8).map(|i| (ip >> (112 - 16 * i)) as u16).collect();
    // The longest run of two or more zero groups, the first on a tie, becomes `::`.
    let (mut best, mut best_len, mut i) = (0, 0, 0);
    while i < 8 {
        let start = i;
        while i < 8 && groups[i] == 0 {
            i += 1;
        }
        if i - start > best_len {
            (best, best_len) = (start, i - start);
        }
        i += 1;
    }
    let hex = |g: &[u16]| {
        g.iter()
            .map(|g| format!("{g:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len < 2 {
        return hex(&groups);
    }
    format!(
        "{}::{}",
        hex(&groups[..best]),
        hex(&groups[best + best_len..])
    )
}

/// Go's `IPNet.String`: an IPv4-mapped IPv6 network prints as IPv4 with the last 32 bits
/// of its mask.
fn format_net(ip: u128, len: u32, bits: u32) -> String {
    let len = if bits == 128 && ip >> 32 == 0xffff {
        len.saturating_sub(96)
    } else {
        len
    };
    format!("{}/{len}", format_ip(ip, bits))
}

fn prefix(a: &Args, i: usize) -> R<Net> {
    let s = a.string(i)?;
    parse_cidr(&s).map_err(|e| a.arg_err(i, format!("invalid CIDR expression: {e}")))
}

/// A whole number argument as a signed 128-bit integer.
fn whole(a: &Args, i: usize) -> R<i128> {
    Ok(i128::from(a.int(i)?))
}

pub(super) fn cidrhost(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let net = prefix(a, 0)?;
    let num = whole(a, 1)?;
    let host_bits = net.bits - net.len;
    let max = ones(host_bits);
    // go-cidr counts a negative host number back from the last address (-1 is the last).
    let (offset, magnitude) = if num < 0 {
        let back = num.unsigned_abs() - 1;
        (max.wrapping_sub(back), back)
    } else {
        (num.unsigned_abs(), num.unsigned_abs())
    };
    if magnitude > max {
        return Err(a.fail(format!(
            "prefix of {} does not accommodate a host numbered {num}",
            net.len
        )));
    }
    Ok(Value::String(format_ip(net.ip | offset, net.bits)))
}

pub(super) fn cidrnetmask(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let net = prefix(a, 0)?;
    if net.bits != 32 {
        let s = a.string(0)?;
        return Err(a.fail(format!("IPv6 addresses cannot have a netmask: {s}")));
    }
    Ok(Value::String(format_ip(mask(net.len, 32), 32)))
}

pub(super) fn cidrsubnet(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let net = prefix(a, 0)?;
    let newbits = whole(a, 1)?;
    let num = whole(a, 2)?;
    let new_len = i128::from(net.len) + newbits;
    if new_len > i128::from(net.bits) {
        return Err(a.fail(format!(
            "insufficient address space to extend prefix of {} by {newbits}",
            net.len
        )));
    }
    if new_len < 0 {
        return Err(a.fail(format!(
            "cannot shorten a prefix of {} by {}",
            net.len, -newbits
        )));
    }
    let new_len = new_len as u32;
    // go-cidr compares the low 64 bits of |netnum| with 2^newbits - 1 computed in uint64
    // (a shift of 64 or more, or of a negative count, gives 0, so the bound wraps to the
    // maximum), and a negative newbits shortens the prefix.
    let max = if (0..64).contains(&newbits) {
        (1u64 << newbits) - 1
    } else {
        u64::MAX
    };
    let magnitude = num.unsigned_abs();
    if magnitude as u64 > max {
        return Err(a.fail(format!(
            "prefix extension of {newbits} does not accommodate a subnet numbered {num}"
        )));
    }
    let shifted = magnitude.checked_shl(net.bits - new_len).unwrap_or(0);
    let ip = if num < 0 {
        // big.Int's OR of a negative number works on its infinite two's complement, and
        // the address is then made of the bytes of the result's absolute value.
        (shifted.wrapping_neg() | net.ip).wrapping_neg() & ones(net.bits)
    } else {
        net.ip | shifted
    };
    Ok(Value::String(format_net(ip, new_len, net.bits)))
}

pub(super) fn cidrsubnets(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let net = prefix(a, 0)?;
    let mut out = Vec::with_capacity(a.len().saturating_sub(1));
    let Some(first) = (a.len() > 1).then(|| whole(a, 1)).transpose()? else {
        return Ok(Value::List(out));
    };
    let first_len = (i128::from(net.len) + first).clamp(0, i128::from(net.bits)) as u32;
    // go-cidr's PreviousSubnet: the subnet of the first length just below the prefix.
    let mut current = Net {
        ip: net.ip.wrapping_sub(1) & mask(first_len, net.bits),
        len: first_len,
        bits: net.bits,
    };
    for i in 1..a.len() {
        let newbits = whole(a, i)?;
        if newbits < 1 {
            return Err(a.arg_err(i, "must extend prefix by at least one bit"));
        }
        if newbits > 32 {
            return Err(a.arg_err(i, "may not extend prefix by more than 32 bits"));
        }
        let len = net.len + newbits as u32;
        if len > net.bits {
            let protocol = if net.bits == 32 { "IPv4" } else { "IPv6" };
            return Err(a.arg_err(
                i,
                format!("would extend prefix to {len} bits, which is too long for an {protocol} address"),
            ));
        }
        // go-cidr's NextSubnet: the subnet of this length after the end of the current one.
        let start = current.last() & mask(len, net.bits);
        let end = Net {
            ip: start,
            len,
            bits: net.bits,
        }
        .last();
        let next = end.wrapping_add(1) & ones(net.bits);
        if next == 0 || !net.contains(next) {
            return Err(a.arg_err(
                i,
                format!(
                    "not enough remaining address space for a subnet with a prefix of {len} bits after {}",
                    format_net(current.ip, current.len, net.bits)
                ),
            ));
        }
        current = Net {
            ip: next,
            len,
            bits: net.bits,
        };
        out.push(Value::String(format_net(next, len, net.bits)));
    }
    Ok(Value::List(out))
}
