//! `proxy_allow_ips`: the peers whose PROXY header is believed.

use std::net::IpAddr;

/// Addresses and networks (`10.0.0.0/8`, `::1`), or everyone (`*`).
#[derive(Debug, Clone, Default)]
pub struct Allow {
    any: bool,
    nets: Vec<(IpAddr, u8)>,
}

impl Allow {
    /// From the setting's items (validated by Python already; an error here
    /// names the item anyway).
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Allow, String> {
        let mut allow = Allow::default();
        for item in items {
            let item = item.as_ref().trim();
            if item == "*" {
                allow.any = true;
                continue;
            }
            let (addr, bits) = match item.split_once('/') {
                Some((a, b)) => (a, Some(b)),
                None => (item, None),
            };
            let bad = || format!("proxy_allow_ips: {item:?} is not an address or network");
            let ip: IpAddr = addr.parse().map_err(|_| bad())?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                Some(b) => b.parse::<u8>().map_err(|_| bad())?,
                None => max,
            };
            if bits > max {
                return Err(bad());
            }
            // ::ffff:a.b.c.d/N is the IPv4 network a.b.c.d/(N-96): peers are
            // matched unmapped.
            let bits = if is_mapped(ip) {
                bits.saturating_sub(96)
            } else {
                bits
            };
            allow.nets.push((unmap(ip), bits));
        }
        Ok(allow)
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        if self.any {
            return true;
        }
        // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d.
        let ip = unmap(ip);
        self.nets.iter().any(|&(net, bits)| within(ip, net, bits))
    }
}

fn is_mapped(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn within(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        (IpAddr::V6(a), IpAddr::V6(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        _ => false,
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let full = usize::from(bits / 8);
    let rest = bits % 8;
    if a[..full] != b[..full] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[full] & mask == b[full] & mask
}
