//! The outbound address guard (SSRF): which addresses Quarry's requests made for users may
//! reach.
//!
//! Custom HTTP tools send requests to URLs that a model helped to build, an MCP server a user
//! registers is reached at the URL they gave, and a source a knowledge base's admin attaches
//! (a Git repository over http(s), an S3 endpoint, a WebDAV folder, a site's sitemap) is
//! fetched by the server: every such request goes through this guard. The machine's owner
//! (the CLI, a loopback server without `--auth`) is not guarded; callers decide that and
//! pass `None` or a policy.
//!
//! The rule: a request may reach only *public* addresses, unless an
//! operator allow-lists a range (`--allow-net 10.0.0.0/8,127.0.0.1/32`). Refused unless
//! allow-listed: loopback, unspecified, private (RFC 1918, unique-local), link-local (incl.
//! the cloud metadata address 169.254.169.254), multicast, broadcast, shared/CGNAT
//! (100.64/10), "this network" (0/8), IETF protocol assignments (192.0.0/24, 2001::/23),
//! documentation and benchmarking ranges, reserved (240/4), site-local, discard-only, and IPv6
//! outside the global unicast 2000::/3. IPv6 forms that embed an IPv4 address (mapped
//! `::ffff:a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`,
//! 6to4 `2002::/16`) are judged by the IPv4 address they embed. Cloud metadata host names
//! (`metadata.google.internal`, …) are refused by name.
//!
//! Where the check happens:
//! - IP literals in a URL: [`check_url`] before anything is sent (reqwest does not call the
//!   resolver for literals). The `url` crate's WHATWG parser has already turned decimal
//!   (`http://2130706433/`), octal (`0177.0.0.1`), hex (`0x7f.1`) and short (`127.1`) hosts
//!   into the address they mean, so those are judged as that address.
//! - DNS names: *after* resolution, inside the client's resolver ([`GuardedResolver`], for
//!   reqwest's async and blocking clients alike): it drops refused addresses and fails when
//!   none remain, so the connection can only go to an address that was checked (no window
//!   between check and connect, no DNS rebinding).
//! - Redirects: every hop's URL goes through [`check_url`] (scheme, literal address, metadata
//!   names) in the client's redirect policy ([`guarded_builder`]), at most [`MAX_REDIRECTS`]
//!   hops; names on a hop go through the resolver like any other. A caller that follows
//!   redirects by hand calls [`check_url`] on each hop itself.
//! - Proxies are off (`no_proxy`): a proxy would make the connection on our behalf, unchecked.
//! - A child process that resolves names itself (the `git` command): [`resolve_blocking`]
//!   gives the checked addresses, for the caller to pin the connection to them.
//! - Before any of that, the URL's text: [`unambiguous_url`] refuses a URL that parsers read
//!   differently (curl and `git`, Python's `urllib` and httpx, browsers' WHATWG parser, which
//!   the `url` crate follows) — a backslash before the path, whitespace or control
//!   characters, a user name or password, `%`-escapes or non-ASCII in the host, IPv4 hosts in
//!   odd forms (`0x7f.1`, `127.1`) — and returns the parsed URL, whose re-serialisation
//!   (`Url::as_str`) is what a child process or a client is then handed: the URL that was
//!   checked, never the raw text.
//!
//! The public face: [`NetPolicy`] (the allow-list, [`NetPolicy::check_ip`]), [`Cidr`],
//! [`Refused`] (why, in words that start with `refused: `), [`check_url`], [`check_resolved`]
//! and [`resolve_blocking`], [`GuardedResolver`], [`guarded_builder`], [`guarded_client`],
//! [`shared_guarded_client`], [`refusal_in`], [`ensure_crypto_provider`], [`unambiguous_url`]
//! and its [`AmbiguousUrl`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use url::{Host, Url};

/// The most redirects a guarded client follows.
pub const MAX_REDIRECTS: usize = 5;

/// Host names of cloud metadata services, refused by name (lower case, no trailing dot).
const METADATA_HOST_NAMES: &[&str] = &[
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// An address range: an address and a prefix length (`10.0.0.0/8`, `::1/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why text or numbers make no address range ([`Cidr::new`], `str::parse`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CidrError {
    /// Not an IP address (the text given).
    NotAnAddress(String),
    /// Not a prefix length (the text given).
    NotAPrefix(String),
    /// A prefix longer than the address.
    PrefixTooLong {
        /// The prefix length given.
        prefix: u8,
        /// The address's length in bits.
        max: u8,
    },
    /// Bits set after the prefix.
    HostBitsSet {
        /// The address given.
        addr: IpAddr,
        /// The prefix length.
        prefix: u8,
        /// The network's address, which was probably meant.
        network: IpAddr,
    },
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidrError::NotAnAddress(a) => write!(f, "{a:?} is not an IP address"),
            CidrError::NotAPrefix(p) => write!(f, "{p:?} is not a prefix length"),
            CidrError::PrefixTooLong { prefix, max } => {
                write!(f, "prefix length {prefix} is larger than {max}")
            }
            CidrError::HostBitsSet {
                addr,
                prefix,
                network,
            } => write!(
                f,
                "{addr}/{prefix} has host bits set; did you mean {network}/{prefix}?"
            ),
        }
    }
}

impl std::error::Error for CidrError {}

/// An `--allow-net` entry that is not a range ([`NetPolicy::parse_allow_list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowListError {
    /// The entry, trimmed.
    pub entry: String,
    /// What is wrong with it.
    pub error: CidrError,
}

impl fmt::Display for AllowListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid --allow-net entry {:?}: {}",
            self.entry, self.error
        )
    }
}

impl std::error::Error for AllowListError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl Cidr {
    /// A range; refuses prefixes longer than the address and addresses with host bits set.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Cidr, CidrError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(CidrError::PrefixTooLong { prefix, max });
        }
        let cidr = Cidr { addr, prefix };
        let network = cidr.network();
        if network != addr {
            return Err(CidrError::HostBitsSet {
                addr,
                prefix,
                network,
            });
        }
        Ok(cidr)
    }

    /// A single address (`/32` or `/128`).
    pub fn host(addr: IpAddr) -> Cidr {
        Cidr {
            addr,
            prefix: if addr.is_ipv4() { 32 } else { 128 },
        }
    }

    /// The network's address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask32(self.prefix))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask128(self.prefix))),
        }
    }

    /// Whether `ip` lies in this range (an IPv4 range never contains an IPv6 address, and
    /// the other way round; [`NetPolicy::check_ip`] handles embedded IPv4 forms).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let m = mask32(self.prefix);
                u32::from(net) & m == u32::from(ip) & m
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let m = mask128(self.prefix);
                u128::from(net) & m == u128::from(ip) & m
            }
            _ => false,
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

fn mask128(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// `a.b.c.d/n`, `a.b.c.d`, `x::y/n`, `x::y` or `[x::y]`.
    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a.trim(), Some(p.trim())),
            None => (s, None),
        };
        let addr = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| CidrError::NotAnAddress(addr.to_owned()))?;
        match prefix {
            None => Ok(Cidr::host(addr)),
            Some(p) => {
                let prefix: u8 = p.parse().map_err(|_| CidrError::NotAPrefix(p.to_owned()))?;
                Cidr::new(addr, prefix)
            }
        }
    }
}

/// Which outbound addresses are allowed: public addresses always, non-public ones only when
/// they fall in an allow-listed range. `NetPolicy::default()` allows no non-public address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPolicy {
    allow: Vec<Cidr>,
}

impl NetPolicy {
    /// A policy allowing these ranges besides public addresses.
    pub fn with_allowed(allow: Vec<Cidr>) -> NetPolicy {
        NetPolicy { allow }
    }

    /// Parses a comma-separated list of ranges or single addresses, e.g.
    /// `127.0.0.1/32,10.0.0.0/8,::1`. Blank entries are skipped; an empty list is the default.
    pub fn parse_allow_list(list: &str) -> Result<NetPolicy, AllowListError> {
        let mut allow = Vec::new();
        for entry in list.split(',') {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let cidr = entry.parse::<Cidr>().map_err(|error| AllowListError {
                entry: entry.to_owned(),
                error,
            })?;
            if !allow.contains(&cidr) {
                allow.push(cidr);
            }
        }
        Ok(NetPolicy { allow })
    }

    /// The allow-listed ranges.
    pub fn allowed(&self) -> &[Cidr] {
        &self.allow
    }

    fn allows(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|c| c.contains(ip))
    }

    /// Whether a connection to `ip` is allowed.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refused> {
        let (embedded, class) = classify(ip);
        let Some(class) = class else { return Ok(()) };
        if self.allows(ip) || embedded.is_some_and(|v4| self.allows(IpAddr::V4(v4))) {
            return Ok(());
        }
        Err(Refused::Address {
            ip,
            embedded,
            class,
        })
    }

    /// Refuses cloud metadata host names (by name; their addresses are refused anyway).
    pub fn check_host_name(&self, host: &str) -> Result<(), Refused> {
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if METADATA_HOST_NAMES.contains(&name.as_str()) {
            return Err(Refused::HostName {
                host: host.to_owned(),
            });
        }
        Ok(())
    }
}

/// What kind of non-public address an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddrClass {
    /// `0.0.0.0`, `::`.
    Unspecified,
    /// `0.0.0.0/8`.
    ThisNetwork,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`).
    Private,
    /// `100.64.0.0/10` (carrier-grade NAT).
    SharedCgnat,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// A cloud metadata address (`169.254.169.254`, `fd00:ec2::254` …).
    CloudMetadata,
    /// `192.0.0.0/24`.
    ProtocolAssignments,
    /// Documentation ranges (`192.0.2.0/24`, `2001:db8::/32` …).
    Documentation,
    /// `198.18.0.0/15`.
    Benchmarking,
    /// Multicast.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240.0.0.0/4`.
    Reserved,
    /// `fc00::/7`.
    UniqueLocal,
    /// `fec0::/10` (deprecated site-local).
    SiteLocal,
    /// `100::/64` (discard-only).
    Discard,
    /// Another IANA special-purpose range.
    SpecialPurpose,
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrClass::Unspecified => "the unspecified address",
            AddrClass::ThisNetwork => "a \"this network\" address (0.0.0.0/8)",
            AddrClass::Loopback => "a loopback address",
            AddrClass::Private => "a private address",
            AddrClass::SharedCgnat => "a shared (CGNAT) address",
            AddrClass::LinkLocal => "a link-local address",
            AddrClass::CloudMetadata => "the cloud metadata address (link-local)",
            AddrClass::ProtocolAssignments => "an IETF protocol assignment address",
            AddrClass::Documentation => "a documentation address",
            AddrClass::Benchmarking => "a benchmarking address",
            AddrClass::Multicast => "a multicast address",
            AddrClass::Broadcast => "the broadcast address",
            AddrClass::Reserved => "a reserved address",
            AddrClass::UniqueLocal => "a unique-local (private) address",
            AddrClass::SiteLocal => "a site-local address",
            AddrClass::Discard => "a discard-only address",
            AddrClass::SpecialPurpose => "a special-purpose address",
        })
    }
}

/// The IPv4 address an IPv6 address embeds, for the forms judged by it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    match s {
        // ::ffff:a.b.c.d (IPv4-mapped)
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => v4(hi, lo),
        // ::ffff:0:a.b.c.d (SIIT, IPv4-translated)
        [0, 0, 0, 0, 0xffff, 0, hi, lo] => v4(hi, lo),
        // ::a.b.c.d (IPv4-compatible, deprecated); :: and ::1 are judged as themselves.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => v4(hi, lo),
        // 64:ff9b::/96 (NAT64 well-known prefix)
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => v4(hi, lo),
        // 2002:AABB:CCDD::/48 (6to4)
        [0x2002, hi, lo, ..] => v4(hi, lo),
        _ => None,
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddrClass> {
    let o = ip.octets();
    Some(match o {
        [0, 0, 0, 0] => AddrClass::Unspecified,
        [0, ..] => AddrClass::ThisNetwork,
        [10, ..] => AddrClass::Private,
        [100, b, ..] if b & 0xc0 == 64 => AddrClass::SharedCgnat,
        [127, ..] => AddrClass::Loopback,
        [169, 254, 169, 254] => AddrClass::CloudMetadata,
        [169, 254, ..] => AddrClass::LinkLocal,
        [172, b, ..] if b & 0xf0 == 16 => AddrClass::Private,
        [192, 0, 0, _] => AddrClass::ProtocolAssignments,
        [192, 0, 2, _] => AddrClass::Documentation,
        [192, 88, 99, _] => AddrClass::SpecialPurpose, // deprecated 6to4 relay anycast
        [192, 168, ..] => AddrClass::Private,
        [198, b, ..] if b & 0xfe == 18 => AddrClass::Benchmarking,
        [198, 51, 100, _] => AddrClass::Documentation,
        [203, 0, 113, _] => AddrClass::Documentation,
        [224..=239, ..] => AddrClass::Multicast,
        [255, 255, 255, 255] => AddrClass::Broadcast,
        [240..=255, ..] => AddrClass::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddrClass> {
    let s = ip.segments();
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => AddrClass::Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => AddrClass::Loopback,
        [0x100, 0, 0, 0, ..] => AddrClass::Discard,
        [0x64, 0xff9b, 1, ..] => AddrClass::SpecialPurpose, // local-use NAT64 (RFC 8215)
        [0x2001, 2, 0, ..] => AddrClass::Benchmarking,
        [0x2001, b, ..] if b < 0x200 => AddrClass::ProtocolAssignments, // 2001::/23, Teredo incl.
        [0x2001, 0xdb8, ..] => AddrClass::Documentation,
        [a, ..] if a & 0xfff0 == 0x3ff0 => AddrClass::Documentation, // 3fff::/20
        [a, ..] if a & 0xff00 == 0xff00 => AddrClass::Multicast,
        [a, ..] if a & 0xffc0 == 0xfe80 => AddrClass::LinkLocal,
        [a, ..] if a & 0xffc0 == 0xfec0 => AddrClass::SiteLocal,
        [a, ..] if a & 0xfe00 == 0xfc00 => AddrClass::UniqueLocal,
        [a, ..] if a & 0xe000 != 0x2000 => AddrClass::Reserved, // outside global unicast 2000::/3
        _ => return None,
    })
}

/// The embedded IPv4 address an address is judged by (if any) and its non-public class
/// (`None`: public).
fn classify(ip: IpAddr) -> (Option<Ipv4Addr>, Option<AddrClass>) {
    match ip {
        IpAddr::V4(v4) => (None, classify_v4(v4)),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => (Some(v4), classify_v4(v4)),
            None => (None, classify_v6(v6)),
        },
    }
}

/// Why the guard refused a destination. `Display` gives the text for humans, starting with
/// `refused: `.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// A non-public address that is not allow-listed.
    Address {
        /// The address.
        ip: IpAddr,
        /// The IPv4 address embedded in an IPv6 one (mapped, NAT64 …), when that is what was refused.
        embedded: Option<Ipv4Addr>,
        /// What kind of address it is.
        class: AddrClass,
    },
    /// A cloud metadata host name.
    HostName {
        /// The host name.
        host: String,
    },
    /// A scheme other than http and https.
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// A URL without a host.
    NoHost,
    /// A DNS name all of whose addresses are refused.
    NoAllowedAddress {
        /// The DNS name.
        host: String,
        /// Why each of its addresses was refused.
        refused: Vec<Refused>,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    TooManyRedirects {
        /// The limit.
        max: usize,
    },
}

impl Refused {
    /// The range to allow-list to let this through, when one would.
    pub fn allow_hint(&self) -> Option<String> {
        match self {
            Refused::Address { ip, embedded, .. } => Some(match embedded {
                Some(v4) => format!("{v4}/32"),
                None => Cidr::host(*ip).to_string(),
            }),
            _ => None,
        }
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Address {
                ip,
                embedded: Some(v4),
                class,
            } => {
                write!(f, "{ip} embeds the IPv4 address {v4}, which is {class}")
            }
            Refused::Address {
                ip,
                embedded: None,
                class,
            } => write!(f, "{ip} is {class}"),
            Refused::HostName { host } => write!(f, "{host} is a cloud metadata host name"),
            Refused::Scheme { scheme } => {
                write!(f, "scheme {scheme:?} is not allowed (only http and https)")
            }
            Refused::NoHost => f.write_str("the URL has no host"),
            Refused::NoAllowedAddress { host, refused } => {
                write!(f, "{host} resolves only to refused addresses: ")?;
                for (i, r) in refused.iter().take(4).enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    r.describe(f)?;
                }
                if refused.len() > 4 {
                    write!(f, "; and {} more", refused.len() - 4)?;
                }
                Ok(())
            }
            Refused::TooManyRedirects { max } => write!(f, "more than {max} redirects"),
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refused: ")?;
        self.describe(f)?;
        match self {
            Refused::NoAllowedAddress { refused, .. } => {
                let mut hints: Vec<String> =
                    refused.iter().filter_map(Refused::allow_hint).collect();
                hints.dedup();
                if !hints.is_empty() {
                    write!(f, " (allow one with --allow-net {})", hints.join(","))?;
                }
                Ok(())
            }
            _ => match self.allow_hint() {
                Some(hint) => write!(f, " (allow it with --allow-net {hint})"),
                None => Ok(()),
            },
        }
    }
}

impl std::error::Error for Refused {}

/// Checks a URL before a request is sent: the scheme (http, https), metadata host names, and
/// literal IP hosts (decimal, octal, hex and short IPv4 forms arrive here already normalised
/// by the `url` parser). DNS names pass here; their addresses are checked after resolution by
/// [`GuardedResolver`].
pub fn check_url(policy: &NetPolicy, url: &Url) -> Result<(), Refused> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(Refused::Scheme {
                scheme: other.to_owned(),
            });
        }
    }
    match url.host() {
        None => Err(Refused::NoHost),
        Some(Host::Domain(name)) => {
            policy.check_host_name(name)?;
            // Defence in depth: a name that is really an address literal.
            if let Ok(ip) = name.parse::<IpAddr>() {
                policy.check_ip(ip)?;
            }
            Ok(())
        }
        Some(Host::Ipv4(ip)) => policy.check_ip(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => policy.check_ip(IpAddr::V6(ip)),
    }
}

/// Why a URL's text is refused by [`unambiguous_url`]: parsers would read it differently, or
/// it is not a URL. `Display` says what is wrong and how to write it; it never repeats the URL
/// (which could hold a password).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AmbiguousUrl {
    /// Not a URL at all (the parser's reason).
    NotAUrl(String),
    /// No `scheme://` at its start (`http:/host`, `http:\\host`, `host:8080/x`).
    NoAuthority,
    /// Whitespace or a control character (which one, and its position, counted in
    /// characters from 1).
    Character {
        /// `a line break`, `a tab`, `a space`, `a control character` …
        what: &'static str,
        /// Its position in the URL, from 1.
        at: usize,
    },
    /// A backslash before the path (in the scheme, user information or host).
    Backslash,
    /// A user name or password before the host (`user@host`).
    UserInfo,
    /// A `%`-escape in the host, user information or port.
    PercentInAuthority,
    /// A character outside ASCII in the host.
    NonAsciiHost,
    /// A character no host name has (the character).
    HostCharacter(char),
    /// `scheme://` followed by no host, where the parser found one further on.
    EmptyHost,
    /// The host as written differs from how the parser reads it (`0x7f.1` is `127.0.0.1`).
    HostReadAs {
        /// The host as written.
        written: String,
        /// The host as the parser reads it.
        read: String,
    },
    /// A port that is not a number from 0 to 65535, or is read as another.
    Port(String),
}

impl fmt::Display for AmbiguousUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AmbiguousUrl::NotAUrl(why) => write!(f, "it is not a URL ({why})"),
            AmbiguousUrl::NoAuthority => f.write_str(
                "the URL does not start with a scheme and \"//\" (write it as https://host/path)",
            ),
            AmbiguousUrl::Character { what, at } => write!(
                f,
                "the URL has {what} at character {at}: remove it (some programs drop it, others \
                 stop reading there, so they would not reach the same place)"
            ),
            AmbiguousUrl::Backslash => f.write_str(
                "the URL has a backslash before its path: rewrite it without it (some programs \
                 read it as \"/\", others as part of the host or user name)",
            ),
            AmbiguousUrl::UserInfo => f.write_str(
                "the URL has a user name or password before its host (\"…@\"): leave it out \
                 (programs disagree on where the host starts)",
            ),
            AmbiguousUrl::PercentInAuthority => f.write_str(
                "the URL has a %-escape in its host, user name or port: write the host as plain \
                 text (some programs decode it, others do not)",
            ),
            AmbiguousUrl::NonAsciiHost => f.write_str(
                "the URL's host has a character outside ASCII: write the host in its ASCII \
                 (xn--) form",
            ),
            AmbiguousUrl::HostCharacter(c) => write!(
                f,
                "the URL's host has {c:?}, which no host name has (letters, digits, '-', '.' \
                 and '_'; an IPv6 address in [brackets])"
            ),
            AmbiguousUrl::EmptyHost => f.write_str(
                "the URL has no host after \"//\" (some programs take the next part as the host)",
            ),
            AmbiguousUrl::HostReadAs { written, read } => write!(
                f,
                "the URL's host {written:?} is read as {read:?} by some programs and differently \
                 by others: write {read:?}"
            ),
            AmbiguousUrl::Port(p) => write!(
                f,
                "the URL's port {p:?} is not written as a plain number from 0 to 65535"
            ),
        }
    }
}

impl std::error::Error for AmbiguousUrl {}

/// Parses `raw` as a URL that common parsers read the same way, or says why not.
///
/// The `url` crate follows the WHATWG URL standard (browsers); curl (and `git`, which uses
/// it), Python's `urllib.parse` and httpx follow RFC 3986 more or less loosely. They agree on a
/// URL's scheme, host and port only when its text is plain, so anything else is refused:
///
/// - whitespace or a control character anywhere (WHATWG drops tabs and line breaks and trims
///   the ends; the others keep them or stop there);
/// - a backslash before the path (`http://a.example\@127.0.0.1/`: WHATWG reads `\` as `/`, so
///   the host is `a.example`; curl and `urllib` read `a.example\` as a user name and the host
///   as `127.0.0.1`);
/// - any user information (`user:password@`: where it ends is what parsers disagree on);
/// - `%`-escapes in the authority (WHATWG decodes `%2e` in a host, the others do not), and
///   characters outside ASCII in the host (IDNA versions differ);
/// - a host the parser reads as something other than its text: IPv4 in odd forms
///   (`0x7f.1`, `127.1`, `2130706433`, `0177.0.0.1`, a trailing dot), which WHATWG and curl
///   turn into `127.0.0.1` while `urllib` keeps the text (and the system resolver may
///   do either); a port written as other than a plain number.
///
/// Upper-case scheme and host letters, an IPv6 address in any of its spellings and a default
/// port written out are fine: every parser reads them alike. The path, query and fragment are
/// left to the parser (they cannot move the host): hand every program the returned URL's
/// `as_str()`, the text that was checked, never `raw`.
pub fn unambiguous_url(raw: &str) -> Result<Url, AmbiguousUrl> {
    for (i, c) in raw.chars().enumerate() {
        let what = match c {
            '\n' | '\r' => "a line break",
            '\t' => "a tab",
            ' ' => "a space",
            c if c.is_whitespace() => "a space character",
            c if c.is_control() => "a control character",
            _ => continue,
        };
        return Err(AmbiguousUrl::Character { what, at: i + 1 });
    }
    // The scheme and authority as RFC 3986 parsers cut them: the authority ends at the first
    // '/', '?' or '#' (WHATWG also ends it at '\', refused below).
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(match Url::parse(raw) {
            Err(e) => AmbiguousUrl::NotAUrl(e.to_string()),
            Ok(_) if raw.contains('\\') => AmbiguousUrl::Backslash,
            Ok(_) => AmbiguousUrl::NoAuthority,
        });
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return Err(if scheme.contains('\\') {
            AmbiguousUrl::Backslash
        } else {
            AmbiguousUrl::NoAuthority
        });
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('\\') {
        return Err(AmbiguousUrl::Backslash);
    }
    if authority.contains('@') {
        return Err(AmbiguousUrl::UserInfo);
    }
    if authority.contains('%') {
        return Err(AmbiguousUrl::PercentInAuthority);
    }
    if !authority.is_ascii() {
        return Err(AmbiguousUrl::NonAsciiHost);
    }
    let url = Url::parse(raw).map_err(|e| AmbiguousUrl::NotAUrl(e.to_string()))?;
    if !url.scheme().eq_ignore_ascii_case(scheme) {
        return Err(AmbiguousUrl::NoAuthority);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(AmbiguousUrl::UserInfo);
    }
    // Host and port as written: `[v6]` or a name, then `:port`.
    let (host, port) = if let Some(after) = authority.strip_prefix('[') {
        let Some((v6, tail)) = after.split_once(']') else {
            return Err(AmbiguousUrl::HostCharacter('['));
        };
        let parsed: Ipv6Addr = v6.parse().map_err(|_| AmbiguousUrl::HostReadAs {
            written: format!("[{v6}]"),
            read: url.host_str().unwrap_or_default().to_owned(),
        })?;
        if url.host() != Some(Host::Ipv6(parsed)) {
            return Err(AmbiguousUrl::HostReadAs {
                written: format!("[{v6}]"),
                read: url.host_str().unwrap_or_default().to_owned(),
            });
        }
        match tail {
            "" => (None, None),
            t => match t.strip_prefix(':') {
                Some(p) => (None, Some(p)),
                None => return Err(AmbiguousUrl::HostCharacter(']')),
            },
        }
    } else {
        let (h, p) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if let Some(c) = h
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
        {
            return Err(AmbiguousUrl::HostCharacter(c));
        }
        (Some(h), p)
    };
    if let Some(written) = host {
        match url.host_str() {
            None | Some("") if written.is_empty() => {}
            _ if written.is_empty() => return Err(AmbiguousUrl::EmptyHost),
            Some(read) if read.eq_ignore_ascii_case(written) => {}
            read => {
                return Err(AmbiguousUrl::HostReadAs {
                    written: written.to_owned(),
                    read: read.unwrap_or_default().to_owned(),
                });
            }
        }
    }
    if let Some(p) = port {
        // An empty port is the default for WHATWG and curl, an error for others.
        let number = (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u16>().ok())
            .flatten();
        if number.is_none() || number != url.port_or_known_default() {
            return Err(AmbiguousUrl::Port(p.to_owned()));
        }
    }
    Ok(url)
}

/// Why a host name cannot be reached ([`check_resolved`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResolveError {
    /// Not a valid DNS name.
    InvalidName {
        /// The host name.
        host: String,
        /// Why not.
        reason: String,
    },
    /// The guard refused it: a metadata host name, or one whose every address is refused.
    Refused(Refused),
    /// The lookup failed (no such name, no resolver).
    Lookup(String),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::InvalidName { host, reason } => {
                write!(f, "invalid host name '{host}': {reason}")
            }
            ResolveError::Refused(r) => write!(f, "{r}"),
            ResolveError::Lookup(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResolveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResolveError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

/// Resolves `url`'s host name as a guarded client would, so a name whose every address is
/// refused is reported in words before anything connects (a client's transport error may
/// carry the reason only deep in its log). IP literals are [`check_url`]'s.
pub async fn check_resolved(policy: &NetPolicy, url: &Url) -> Result<(), ResolveError> {
    let Some(Host::Domain(host)) = url.host() else {
        return Ok(());
    };
    let name: reqwest::dns::Name = host.parse().map_err(|e| ResolveError::InvalidName {
        host: host.to_owned(),
        reason: format!("{e}"),
    })?;
    reqwest::dns::Resolve::resolve(&GuardedResolver::new(Arc::new(policy.clone())), name)
        .await
        .map(|_| ())
        .map_err(|e| match e.downcast::<Refused>() {
            Ok(refused) => ResolveError::Refused(*refused),
            Err(e) => ResolveError::Lookup(e.to_string()),
        })
}

/// The addresses of `resolved` the policy allows (each once, in order); a
/// [`Refused::NoAllowedAddress`] when none is, a lookup error when there were none.
fn keep_allowed(
    policy: &NetPolicy,
    host: &str,
    resolved: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let mut allowed: Vec<SocketAddr> = Vec::new();
    let mut refused: Vec<Refused> = Vec::new();
    for addr in resolved {
        match policy.check_ip(addr.ip()) {
            Ok(()) => {
                if !allowed.contains(&addr) {
                    allowed.push(addr);
                }
            }
            Err(r) => {
                if !refused.contains(&r) {
                    refused.push(r);
                }
            }
        }
    }
    if allowed.is_empty() {
        if refused.is_empty() {
            return Err(ResolveError::Lookup(format!(
                "{host}: the name resolved to no address"
            )));
        }
        tracing::debug!(%host, "outbound guard: every resolved address refused");
        return Err(ResolveError::Refused(Refused::NoAllowedAddress {
            host: host.to_owned(),
            refused,
        }));
    }
    if !refused.is_empty() {
        tracing::debug!(%host, dropped = refused.len(), "outbound guard: dropped refused addresses");
    }
    Ok(allowed)
}

/// Resolves `host` with the system resolver, blocking, and returns the addresses (with
/// `port`) the policy allows: for a child process that resolves names itself (the `git`
/// command), whose connection the caller then pins to these addresses. A metadata host name,
/// or a name whose every address is refused, is [`ResolveError::Refused`]; an IP literal is
/// checked as itself. Call it from a blocking thread.
pub fn resolve_blocking(
    policy: &NetPolicy,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        policy.check_ip(ip).map_err(ResolveError::Refused)?;
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    policy
        .check_host_name(bare)
        .map_err(ResolveError::Refused)?;
    let resolved: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(bare, port))
        .map_err(|e| ResolveError::Lookup(format!("{bare}: {e}")))?
        .collect();
    keep_allowed(policy, bare, resolved)
}

/// Finds a [`Refused`] in an error's source chain (a reqwest error wraps the resolver's or the
/// redirect policy's refusal a few levels down).
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r);
        }
        cur = e.source();
    }
    None
}

/// A DNS resolver for reqwest that resolves with the system resolver and keeps only the
/// addresses the policy allows; it fails when none remain, so a connection can only be made
/// to a checked address.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<NetPolicy>,
}

impl GuardedResolver {
    /// A resolver that checks every address against `policy`.
    pub fn new(policy: Arc<NetPolicy>) -> GuardedResolver {
        GuardedResolver { policy }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            policy.check_host_name(&host)?;
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed = keep_allowed(&policy, &host, resolved).map_err(
                |e| -> Box<dyn std::error::Error + Send + Sync> {
                    match e {
                        ResolveError::Refused(r) => Box::new(r),
                        other => other.to_string().into(),
                    }
                },
            )?;
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The redirect policy: every hop is checked with [`check_url`], at most [`MAX_REDIRECTS`]
/// hops. With `same_origin_only`, a redirect to another origin is not followed: the 3xx
/// response comes back as the response.
fn redirect_policy(policy: Arc<NetPolicy>, same_origin_only: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        // `previous` holds the original URL and every hop so far.
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(Refused::TooManyRedirects { max: MAX_REDIRECTS });
        }
        if let Err(refused) = check_url(&policy, attempt.url()) {
            return attempt.error(refused);
        }
        if same_origin_only
            && let Some(first) = attempt.previous().first()
            && first.origin() != attempt.url().origin()
        {
            return attempt.stop();
        }
        attempt.follow()
    })
}

/// Makes sure rustls has a process-wide crypto provider (ring), which reqwest's
/// `rustls-no-provider` build needs before a client is built. Keeps one already installed.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The start of a reqwest client whose every connection goes through the guard: the
/// [`GuardedResolver`], the checking redirect policy (with `same_origin_redirects`, only
/// redirects that stay on the first URL's origin are followed), no proxy, no `Referer`; the
/// crypto provider is installed. The caller adds timeouts and builds it. IP-literal URLs
/// bypass the resolver: check them with [`check_url`] before sending.
pub fn guarded_builder(policy: &NetPolicy, same_origin_redirects: bool) -> reqwest::ClientBuilder {
    ensure_crypto_provider();
    let policy = Arc::new(policy.clone());
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(GuardedResolver::new(policy.clone()))
        .redirect(redirect_policy(policy, same_origin_redirects))
        .referer(false)
}

/// A reqwest client whose every connection goes through the guard: the [`GuardedResolver`],
/// the checking redirect policy, no proxy, no `Referer`, and `timeout` for the whole request
/// (body included). IP-literal URLs bypass the resolver: check them with [`check_url`] before
/// sending.
pub fn guarded_client(
    policy: &NetPolicy,
    timeout: Duration,
) -> Result<reqwest::Client, reqwest::Error> {
    guarded_client_with(policy, timeout, false)
}

/// [`guarded_client`], with `same_origin_redirects`: follow only redirects that stay on the
/// first URL's origin (used when the request carries secret headers that must not travel to
/// another host).
pub fn guarded_client_with(
    policy: &NetPolicy,
    timeout: Duration,
    same_origin_redirects: bool,
) -> Result<reqwest::Client, reqwest::Error> {
    guarded_builder(policy, same_origin_redirects)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("quarry/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The longest a shared client lets one request take; each request sets its own timeout.
const SHARED_CLIENT_TIMEOUT: Duration = Duration::from_secs(600);
/// Shared clients kept (one per policy and redirect rule; a server has a handful).
const SHARED_CLIENTS: usize = 16;

/// A [`guarded_client_with`] shared by every call with the same policy and redirect rule, so
/// calls reuse connections and the TLS roots are loaded once (building a client reads the
/// system's certificates, milliseconds per call). Set the request's own timeout with
/// `RequestBuilder::timeout`.
pub fn shared_guarded_client(
    policy: &NetPolicy,
    same_origin_redirects: bool,
) -> Result<reqwest::Client, reqwest::Error> {
    type Entry = (NetPolicy, bool, reqwest::Client);
    static CLIENTS: std::sync::Mutex<Vec<Entry>> = std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, c)) = clients
        .iter()
        .find(|(p, s, _)| p == policy && *s == same_origin_redirects)
    {
        return Ok(c.clone());
    }
    let client = guarded_client_with(policy, SHARED_CLIENT_TIMEOUT, same_origin_redirects)?;
    if clients.len() >= SHARED_CLIENTS {
        clients.remove(0);
    }
    clients.push((policy.clone(), same_origin_redirects, client.clone()));
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn refuses_non_public_addresses() {
        let p = NetPolicy::default();
        let cases = [
            ("127.0.0.1", AddrClass::Loopback),
            ("127.255.0.9", AddrClass::Loopback),
            ("::1", AddrClass::Loopback),
            ("0.0.0.0", AddrClass::Unspecified),
            ("::", AddrClass::Unspecified),
            ("0.1.2.3", AddrClass::ThisNetwork),
            ("10.0.0.1", AddrClass::Private),
            ("172.16.0.1", AddrClass::Private),
            ("172.31.255.255", AddrClass::Private),
            ("192.168.1.1", AddrClass::Private),
            ("fc00::1", AddrClass::UniqueLocal),
            ("fd00:ec2::254", AddrClass::UniqueLocal),
            ("169.254.169.254", AddrClass::CloudMetadata),
            ("169.254.1.1", AddrClass::LinkLocal),
            ("fe80::1", AddrClass::LinkLocal),
            ("fec0::1", AddrClass::SiteLocal),
            ("224.0.0.1", AddrClass::Multicast),
            ("239.255.255.250", AddrClass::Multicast),
            ("ff02::1", AddrClass::Multicast),
            ("255.255.255.255", AddrClass::Broadcast),
            ("100.64.0.1", AddrClass::SharedCgnat),
            ("100.127.255.254", AddrClass::SharedCgnat),
            ("192.0.0.8", AddrClass::ProtocolAssignments),
            ("192.0.2.1", AddrClass::Documentation),
            ("198.18.0.1", AddrClass::Benchmarking),
            ("198.19.255.1", AddrClass::Benchmarking),
            ("198.51.100.7", AddrClass::Documentation),
            ("203.0.113.9", AddrClass::Documentation),
            ("2001:db8::1", AddrClass::Documentation),
            ("240.0.0.1", AddrClass::Reserved),
            ("100::1", AddrClass::Discard),
            ("2001::1", AddrClass::ProtocolAssignments),
            ("4000::1", AddrClass::Reserved),
        ];
        for (addr, class) in cases {
            match p.check_ip(ip(addr)) {
                Err(Refused::Address { class: c, .. }) => assert_eq!(c, class, "{addr}"),
                other => panic!("{addr}: {other:?}"),
            }
        }
    }

    #[test]
    fn allows_public_addresses() {
        let p = NetPolicy::default();
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(p.check_ip(ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn embedded_ipv4_forms_are_judged_by_the_ipv4_address() {
        let p = NetPolicy::default();
        for (addr, v4) in [
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("::ffff:7f00:1", "127.0.0.1"),
            ("::ffff:0:a00:1", "10.0.0.1"),
            ("::127.0.0.1", "127.0.0.1"),
            ("::169.254.169.254", "169.254.169.254"),
            ("64:ff9b::7f00:1", "127.0.0.1"),
            ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
            ("2002:c0a8:101::1", "192.168.1.1"),
        ] {
            match p.check_ip(ip(addr)) {
                Err(
                    r @ Refused::Address {
                        embedded: Some(e), ..
                    },
                ) => {
                    assert_eq!(IpAddr::V4(e), ip(v4), "{addr}");
                    assert!(
                        r.to_string().contains(&format!("--allow-net {v4}/32")),
                        "{r}"
                    );
                }
                other => panic!("{addr}: {other:?}"),
            }
        }
        // The allow list applies to the embedded address too.
        let p = NetPolicy::parse_allow_list("127.0.0.1/32").unwrap();
        assert_eq!(p.check_ip(ip("::ffff:127.0.0.1")), Ok(()));
    }

    #[test]
    fn error_text_is_clear() {
        let r = NetPolicy::default().check_ip(ip("127.0.0.1")).unwrap_err();
        assert_eq!(
            r.to_string(),
            "refused: 127.0.0.1 is a loopback address (allow it with --allow-net 127.0.0.1/32)"
        );
        let r = NetPolicy::default().check_ip(ip("::1")).unwrap_err();
        assert_eq!(
            r.to_string(),
            "refused: ::1 is a loopback address (allow it with --allow-net ::1/128)"
        );
        let r = NetPolicy::default()
            .check_ip(ip("::ffff:10.1.2.3"))
            .unwrap_err();
        assert_eq!(
            r.to_string(),
            "refused: ::ffff:10.1.2.3 embeds the IPv4 address 10.1.2.3, which is a private address \
             (allow it with --allow-net 10.1.2.3/32)"
        );
        let r = Refused::NoAllowedAddress {
            host: "localhost".into(),
            refused: vec![
                NetPolicy::default().check_ip(ip("127.0.0.1")).unwrap_err(),
                NetPolicy::default().check_ip(ip("::1")).unwrap_err(),
            ],
        };
        assert_eq!(
            r.to_string(),
            "refused: localhost resolves only to refused addresses: 127.0.0.1 is a loopback address; \
             ::1 is a loopback address (allow one with --allow-net 127.0.0.1/32,::1/128)"
        );
    }

    #[test]
    fn allow_list_parses_and_applies() {
        let p = NetPolicy::parse_allow_list(" 127.0.0.1/32, 10.0.0.0/8 ,::1,[fd00::]/8,").unwrap();
        assert_eq!(p.allowed().len(), 4);
        assert_eq!(p.allowed()[2].to_string(), "::1/128");
        assert_eq!(p.check_ip(ip("127.0.0.1")), Ok(()));
        assert!(p.check_ip(ip("127.0.0.2")).is_err());
        assert_eq!(p.check_ip(ip("10.200.3.4")), Ok(()));
        assert_eq!(p.check_ip(ip("::1")), Ok(()));
        assert_eq!(p.check_ip(ip("fd12::1")), Ok(()));
        assert!(p.check_ip(ip("192.168.0.1")).is_err());
        assert_eq!(
            NetPolicy::parse_allow_list("").unwrap(),
            NetPolicy::default()
        );
        assert_eq!(
            NetPolicy::parse_allow_list("0.0.0.0/0")
                .unwrap()
                .check_ip(ip("169.254.169.254")),
            Ok(())
        );
    }

    #[test]
    fn allow_list_errors_are_clear() {
        let e = NetPolicy::parse_allow_list("10.0.0.0/33").unwrap_err();
        assert_eq!(
            e.error,
            CidrError::PrefixTooLong {
                prefix: 33,
                max: 32
            }
        );
        assert_eq!(
            e.to_string(),
            "invalid --allow-net entry \"10.0.0.0/33\": prefix length 33 is larger than 32"
        );
        let e = NetPolicy::parse_allow_list("127.0.0.1/32,localhost").unwrap_err();
        assert_eq!(e.entry, "localhost");
        assert_eq!(e.error, CidrError::NotAnAddress("localhost".into()));
        assert_eq!(
            e.to_string(),
            "invalid --allow-net entry \"localhost\": \"localhost\" is not an IP address"
        );
        let e = NetPolicy::parse_allow_list("10.0.0.1/8").unwrap_err();
        assert!(matches!(e.error, CidrError::HostBitsSet { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("host bits set; did you mean 10.0.0.0/8?"),
            "{e}"
        );
        let e = NetPolicy::parse_allow_list("10.0.0.0/x").unwrap_err();
        assert_eq!(e.error, CidrError::NotAPrefix("x".into()));
        assert!(
            e.to_string().contains("\"x\" is not a prefix length"),
            "{e}"
        );
        assert!(NetPolicy::parse_allow_list("::1/129").is_err());
    }

    #[test]
    fn cidr_edges() {
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("255.1.2.3")));
        assert!(!all.contains(ip("::1")));
        let six: Cidr = "::/0".parse().unwrap();
        assert!(six.contains(ip("2001:db8::1")));
        let net: Cidr = "172.16.0.0/12".parse().unwrap();
        assert!(net.contains(ip("172.31.0.1")));
        assert!(!net.contains(ip("172.32.0.1")));
    }

    fn url_refusal(s: &str) -> Option<Refused> {
        check_url(&NetPolicy::default(), &Url::parse(s).unwrap()).err()
    }

    #[test]
    fn url_host_forms_are_normalised_by_the_parser() {
        for s in [
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.0.0.1/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://017700000001/",
            "HTTP://127.0.0.1:8080/x",
        ] {
            let url = Url::parse(s).unwrap();
            assert_eq!(url.host(), Some(Host::Ipv4(Ipv4Addr::LOCALHOST)), "{s}");
            match url_refusal(s) {
                Some(
                    r @ Refused::Address {
                        class: AddrClass::Loopback,
                        ..
                    },
                ) => {
                    assert!(
                        r.to_string()
                            .starts_with("refused: 127.0.0.1 is a loopback address"),
                        "{r}"
                    )
                }
                other => panic!("{s}: {other:?}"),
            }
        }
        assert!(matches!(
            url_refusal("http://[::1]/"),
            Some(Refused::Address { .. })
        ));
        assert!(matches!(
            url_refusal("http://[::ffff:127.0.0.1]/"),
            Some(Refused::Address { .. })
        ));
        assert!(matches!(
            url_refusal("http://[0:0:0:0:0:ffff:7f00:1]:80/"),
            Some(Refused::Address { .. })
        ));
        assert!(matches!(
            url_refusal("http://169.254.169.254/latest/meta-data/"),
            Some(Refused::Address { .. })
        ));
        assert_eq!(url_refusal("https://example.com/"), None);
        assert_eq!(url_refusal("http://93.184.215.14/"), None);
    }

    #[test]
    fn url_schemes_and_metadata_names() {
        assert_eq!(
            url_refusal("file:///etc/passwd"),
            Some(Refused::Scheme {
                scheme: "file".into()
            })
        );
        assert!(matches!(
            url_refusal("gopher://example.com/"),
            Some(Refused::Scheme { .. })
        ));
        assert!(matches!(
            url_refusal("ftp://example.com/"),
            Some(Refused::Scheme { .. })
        ));
        for s in [
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://METADATA.google.internal./",
            "http://metadata/",
        ] {
            let r = url_refusal(s).unwrap();
            assert!(matches!(r, Refused::HostName { .. }), "{s}");
            assert!(
                r.to_string().contains("is a cloud metadata host name"),
                "{r}"
            );
        }
    }

    /// Parser differentials: (URL, what the WHATWG parser — the `url` crate — reads as its
    /// host, what curl / `git` / httpx / `urllib.parse` read, and the refusal now).
    #[test]
    fn urls_that_parsers_read_differently_are_refused() {
        use AmbiguousUrl as A;
        type Case = (
            &'static str,
            Option<&'static str>,
            &'static str,
            fn(&AmbiguousUrl) -> bool,
        );
        let cases: &[Case] = &[
            // WHATWG: `\` is `/`, host 1.1.1.1; curl and urllib: user `1.1.1.1\`, host 127.0.0.1.
            (
                "http://1.1.1.1\\@127.0.0.1:18993/internal.git",
                Some("1.1.1.1"),
                "127.0.0.1",
                |e| *e == A::Backslash,
            ),
            (
                "http://allowed.example\\@127.0.0.1:18996/secret",
                Some("allowed.example"),
                "127.0.0.1",
                |e| *e == A::Backslash,
            ),
            (
                "http://allowed.example\\.evil.org/",
                Some("allowed.example"),
                "allowed.example\\.evil.org",
                |e| *e == A::Backslash,
            ),
            ("http:\\\\127.0.0.1/", Some("127.0.0.1"), "(no host)", |e| {
                *e == A::Backslash
            }),
            // WHATWG drops tabs and line breaks anywhere; the others keep them or stop there.
            (
                "http://127.0.0.1\t.example.com/",
                Some("127.0.0.1.example.com"),
                "127.0.0.1\t.example.com",
                |e| {
                    matches!(
                        e,
                        A::Character {
                            what: "a tab",
                            at: 17
                        }
                    )
                },
            ),
            (
                "http://exa\nmple.com/",
                Some("example.com"),
                "exa\nmple.com (or refused)",
                |e| {
                    matches!(
                        e,
                        A::Character {
                            what: "a line break",
                            ..
                        }
                    )
                },
            ),
            (
                "http://example.com/a\r\nHost: evil",
                Some("example.com"),
                "example.com, header injected",
                |e| {
                    matches!(
                        e,
                        A::Character {
                            what: "a line break",
                            ..
                        }
                    )
                },
            ),
            (
                "http://example.com /x",
                None,
                "example.com (or refused)",
                |e| {
                    matches!(
                        e,
                        A::Character {
                            what: "a space",
                            ..
                        }
                    )
                },
            ),
            ("http://exa\u{0}mple.com/", None, "exa (cut at NUL)", |e| {
                matches!(
                    e,
                    A::Character {
                        what: "a control character",
                        ..
                    }
                )
            }),
            ("http://example.com\u{7f}/", None, "example.com\\x7f", |e| {
                matches!(
                    e,
                    A::Character {
                        what: "a control character",
                        ..
                    }
                )
            }),
            ("http://example.com\u{a0}/", None, "example.com\\xa0", |e| {
                matches!(
                    e,
                    A::Character {
                        what: "a space character",
                        ..
                    }
                )
            }),
            // %-escapes in the authority: WHATWG decodes them in a host, the others do not.
            (
                "http://127.0.0.1%2eexample.com/",
                Some("127.0.0.1.example.com"),
                "127.0.0.1%2eexample.com",
                |e| *e == A::PercentInAuthority,
            ),
            (
                "http://%31%32%37.0.0.1/",
                Some("127.0.0.1"),
                "%31%32%37.0.0.1",
                |e| *e == A::PercentInAuthority,
            ),
            (
                "http://a%40b@127.0.0.1/",
                Some("127.0.0.1"),
                "127.0.0.1",
                |e| *e == A::UserInfo || *e == A::PercentInAuthority,
            ),
            // User information: where it ends is what parsers disagree on.
            (
                "http://user:pw@example.com/",
                Some("example.com"),
                "example.com",
                |e| *e == A::UserInfo,
            ),
            (
                "http://a@b@127.0.0.1/",
                Some("127.0.0.1"),
                "127.0.0.1 (or b)",
                |e| *e == A::UserInfo,
            ),
            ("http://u\\:p@127.0.0.1/", Some("u"), "127.0.0.1", |e| {
                *e == A::Backslash
            }),
            // IPv4 in odd forms: WHATWG and curl read 127.0.0.1, urllib keeps the text.
            (
                "http://0x7f.1/",
                Some("127.0.0.1"),
                "0x7f.1",
                |e| matches!(e, A::HostReadAs { read, .. } if read == "127.0.0.1"),
            ),
            ("http://127.1/", Some("127.0.0.1"), "127.1", |e| {
                matches!(e, A::HostReadAs { .. })
            }),
            ("http://2130706433/", Some("127.0.0.1"), "2130706433", |e| {
                matches!(e, A::HostReadAs { .. })
            }),
            ("http://0177.0.0.1/", Some("127.0.0.1"), "0177.0.0.1", |e| {
                matches!(e, A::HostReadAs { .. })
            }),
            ("http://127.0.0.1./", Some("127.0.0.1"), "127.0.0.1.", |e| {
                matches!(e, A::HostReadAs { .. })
            }),
            // Non-ASCII hosts: IDNA 2003 and 2008 differ (ß).
            (
                "http://faß.example/",
                Some("xn--fa-hia.example"),
                "fass.example (IDNA 2003)",
                |e| *e == A::NonAsciiHost,
            ),
            // No `//`, or nothing between it and the next part.
            ("http:/127.0.0.1/", Some("127.0.0.1"), "(no host)", |e| {
                *e == A::NoAuthority
            }),
            ("http:///127.0.0.1/", Some("127.0.0.1"), "(no host)", |e| {
                *e == A::EmptyHost
            }),
            (
                "http://example.com:/",
                Some("example.com"),
                "example.com, port ''",
                |e| matches!(e, A::Port(p) if p.is_empty()),
            ),
            ("http://example.com:8o/", None, "(refused)", |e| {
                matches!(e, A::NotAUrl(_))
            }),
            ("http://exa_mple.com!/", None, "exa_mple.com!", |e| {
                *e == A::HostCharacter('!') || matches!(e, A::NotAUrl(_))
            }),
            ("not a url", None, "(refused)", |e| {
                matches!(e, A::Character { .. })
            }),
            ("example.com/x", None, "(refused)", |e| {
                matches!(e, A::NotAUrl(_))
            }),
            ("localhost:8080/x", Some(""), "localhost", |e| {
                *e == A::NoAuthority
            }),
        ];
        for (raw, whatwg, others, is) in cases {
            if let Some(host) = whatwg {
                // What the WHATWG parser alone says, for the record.
                let parsed = Url::parse(raw).map(|u| u.host_str().unwrap_or_default().to_owned());
                assert_eq!(parsed.as_deref(), Ok(*host), "{raw:?} (others: {others})");
            }
            match unambiguous_url(raw) {
                Err(e) => {
                    assert!(is(&e), "{raw:?}: {e:?}");
                    let text = e.to_string();
                    assert!(
                        !text.contains("pw") && !text.contains(raw),
                        "{raw:?}: {text}"
                    );
                }
                Ok(u) => panic!("{raw:?} passed as {u}"),
            }
        }
        assert!(
            AmbiguousUrl::Backslash
                .to_string()
                .starts_with("the URL has a backslash before its path: rewrite it without it")
        );
    }

    #[test]
    fn plain_urls_pass_and_come_back_as_checked() {
        for (raw, serialised) in [
            (
                "https://example.com/a/b?q=1#f",
                "https://example.com/a/b?q=1#f",
            ),
            ("HTTPS://Example.COM/x", "https://example.com/x"),
            ("http://example.com", "http://example.com/"),
            ("http://example.com:80/x", "http://example.com/x"),
            (
                "http://127.0.0.1:18993/r.git",
                "http://127.0.0.1:18993/r.git",
            ),
            ("http://[::1]:8080/", "http://[::1]:8080/"),
            ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
            ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
            ("https://example.com./x", "https://example.com./x"),
            ("https://a-b_c.example.com/", "https://a-b_c.example.com/"),
            // The path is the parser's: a `\` there cannot move the host, and what is sent is
            // the re-serialised text.
            ("http://example.com/a\\b", "http://example.com/a/b"),
            ("http://example.com/a/../b", "http://example.com/b"),
            ("http://example.com/ü", "http://example.com/%C3%BC"),
            ("http://example.com/?u=a@b", "http://example.com/?u=a@b"),
            ("s3://bucket/prefix", "s3://bucket/prefix"),
            ("file:///etc/passwd", "file:///etc/passwd"),
        ] {
            match unambiguous_url(raw) {
                Ok(u) => assert_eq!(u.as_str(), serialised, "{raw}"),
                Err(e) => panic!("{raw}: {e}"),
            }
        }
    }

    #[tokio::test]
    async fn resolver_drops_refused_addresses() {
        use reqwest::dns::Resolve;
        let strict = GuardedResolver::new(Arc::new(NetPolicy::default()));
        let err = match strict.resolve("localhost".parse().unwrap()).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(e) => e,
        };
        let refused = refusal_in(err.as_ref()).expect("a refusal");
        assert!(
            matches!(refused, Refused::NoAllowedAddress { .. }),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("localhost resolves only to refused addresses"),
            "{refused}"
        );

        let open = GuardedResolver::new(Arc::new(
            NetPolicy::parse_allow_list("127.0.0.0/8,::1").unwrap(),
        ));
        let addrs: Vec<SocketAddr> = match open.resolve("localhost".parse().unwrap()).await {
            Ok(a) => a.collect(),
            Err(e) => panic!("{e}"),
        };
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));

        let meta = strict
            .resolve("metadata.google.internal".parse().unwrap())
            .await;
        assert!(matches!(
            meta.err().as_deref().and_then(|e| refusal_in(e)),
            Some(Refused::HostName { .. })
        ));
    }

    #[test]
    fn blocking_resolution_keeps_only_allowed_addresses() {
        let strict = NetPolicy::default();
        // A DNS name that resolves to loopback only.
        match resolve_blocking(&strict, "localhost", 80) {
            Err(ResolveError::Refused(r @ Refused::NoAllowedAddress { .. })) => {
                assert!(
                    r.to_string()
                        .contains("localhost resolves only to refused addresses"),
                    "{r}"
                );
            }
            other => panic!("localhost must be refused: {other:?}"),
        }
        // Literals are judged as themselves, bracketed or not.
        for host in [
            "127.0.0.1",
            "[::1]",
            "::ffff:127.0.0.1",
            "169.254.169.254",
            "10.1.2.3",
        ] {
            assert!(
                matches!(
                    resolve_blocking(&strict, host, 80),
                    Err(ResolveError::Refused(Refused::Address { .. }))
                ),
                "{host}"
            );
        }
        assert!(matches!(
            resolve_blocking(&strict, "metadata.google.internal", 80),
            Err(ResolveError::Refused(Refused::HostName { .. }))
        ));
        assert_eq!(
            resolve_blocking(&strict, "93.184.215.14", 443).unwrap(),
            vec![SocketAddr::new(ip("93.184.215.14"), 443)]
        );
        // Allow-listed: the addresses come back with the port.
        let open = NetPolicy::parse_allow_list("127.0.0.0/8,::1").unwrap();
        let addrs = resolve_blocking(&open, "localhost", 8080).unwrap();
        assert!(!addrs.is_empty());
        assert!(
            addrs
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 8080)
        );
    }
}
