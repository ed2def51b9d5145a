//! Which identity providers people may sign in with, read once at start-up: a JSON file
//! (`QUARRY_OIDC_CONFIG`, several providers, group mappings) and a one-provider shorthand from
//! the environment (`QUARRY_OIDC_ISSUER`, `QUARRY_OIDC_CLIENT_ID`, `QUARRY_OIDC_CLIENT_SECRET`).
//! Everything is checked here, so a server with a wrong entry does not start.

use quarry_access::GroupRule;
use quarry_store::Role;
use serde::Deserialize;
use url::Url;

/// Default bound of a web session, in minutes (12 hours).
pub const DEFAULT_SESSION_MINUTES: f64 = 720.0;
/// Longest bound of a web session, in minutes (30 days).
pub const MAX_SESSION_MINUTES: f64 = 43_200.0;
/// Shortest bound of a web session, in minutes (6 seconds: tests of expiry).
pub const MIN_SESSION_MINUTES: f64 = 0.1;

/// A client secret: never printed, never in an error.
#[derive(Clone, Default)]
pub struct ClientSecret(String);

impl ClientSecret {
    /// The secret itself, for the token request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(…)")
    }
}

/// A claim that must have a value (a string equal to it, or a list containing it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiredClaim {
    /// The claim's name (`hd`, `groups`, `tenant`).
    pub claim: String,
    /// The value it must have.
    pub value: String,
}

/// One configured provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Short name in URLs (`/ui/oidc/<name>/start`): lowercase letters, digits and `-`.
    pub name: String,
    /// What the sign-in button says.
    pub title: String,
    /// The issuer, exactly as its discovery document and ID tokens state it.
    pub issuer: String,
    /// The client id Quarry is registered under.
    pub client_id: String,
    /// The client secret; `None`: a public client (PKCE alone).
    pub client_secret: Option<ClientSecret>,
    /// Scopes asked for (`openid` always among them).
    pub scopes: Vec<String>,
    /// The claim listing the person's groups.
    pub groups_claim: String,
    /// E-mail domains allowed (the `email` claim, verified); empty: any.
    pub allowed_domains: Vec<String>,
    /// A claim every person must have.
    pub required_claim: Option<RequiredClaim>,
    /// Provider groups → spaces, roles and reader groups.
    pub rules: Vec<GroupRule>,
}

/// Every provider, and the bound of the sessions signing in makes.
#[derive(Debug, Clone, Default)]
pub struct OidcConfig {
    /// The providers, in the order their buttons show.
    pub providers: Vec<ProviderConfig>,
    /// How long a web session lasts, in milliseconds.
    pub session_ms: i64,
}

impl OidcConfig {
    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Whether any provider is configured.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    session_minutes: Option<f64>,
    #[serde(default)]
    providers: Vec<FileProvider>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProvider {
    name: String,
    #[serde(default)]
    title: Option<String>,
    issuer: String,
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    client_secret_env: Option<String>,
    #[serde(default)]
    scopes: Option<Vec<String>>,
    #[serde(default)]
    groups_claim: Option<String>,
    #[serde(default)]
    allowed_domains: Vec<String>,
    #[serde(default)]
    required_claim: Option<RequiredClaim>,
    #[serde(default)]
    groups: Vec<FileRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    group: String,
    space: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    reader_groups: Vec<String>,
}

/// What start-up read: the file's text (if any) and the shorthand's variables.
#[derive(Debug, Default)]
pub struct ConfigSources<'a> {
    /// `QUARRY_OIDC_CONFIG`'s path and the file's contents.
    pub file: Option<(&'a str, &'a str)>,
    /// `QUARRY_OIDC_ISSUER`.
    pub issuer: Option<&'a str>,
    /// `QUARRY_OIDC_CLIENT_ID`.
    pub client_id: Option<&'a str>,
    /// `QUARRY_OIDC_CLIENT_SECRET`.
    pub client_secret: Option<&'a str>,
}

/// Reads and checks the configuration; `env` looks up the variables a file names
/// (`client_secret_env`). An error says which entry is wrong and how.
pub fn load(
    sources: &ConfigSources<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OidcConfig, String> {
    let mut out = OidcConfig {
        providers: Vec::new(),
        session_ms: minutes_to_ms(DEFAULT_SESSION_MINUTES),
    };
    if let Some((path, text)) = sources.file {
        let file: FileConfig = serde_json::from_str(text).map_err(|e| format!("{path}: {e}"))?;
        if let Some(m) = file.session_minutes {
            if !(MIN_SESSION_MINUTES..=MAX_SESSION_MINUTES).contains(&m) {
                return Err(format!(
                    "{path}: session_minutes must be between {MIN_SESSION_MINUTES} and {MAX_SESSION_MINUTES} (30 days)"
                ));
            }
            out.session_ms = minutes_to_ms(m);
        }
        for p in file.providers {
            let where_ = format!("{path}: provider '{}'", p.name);
            let secret = match (p.client_secret, p.client_secret_env) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "{where_}: give client_secret or client_secret_env, not both"
                    ));
                }
                (Some(s), None) => Some(s),
                (None, Some(var)) => {
                    Some(env(&var).filter(|v| !v.is_empty()).ok_or_else(|| {
                        format!("{where_}: client_secret_env names {var}, which is not set")
                    })?)
                }
                (None, None) => None,
            };
            let rules = p
                .groups
                .into_iter()
                .map(|r| rule(&where_, r))
                .collect::<Result<Vec<_>, _>>()?;
            out.providers.push(provider(
                &where_,
                ProviderFields {
                    name: p.name,
                    title: p.title,
                    issuer: p.issuer,
                    client_id: p.client_id,
                    client_secret: secret,
                    scopes: p.scopes,
                    groups_claim: p.groups_claim,
                    allowed_domains: p.allowed_domains,
                    required_claim: p.required_claim,
                    rules,
                },
            )?);
        }
    }
    match (sources.issuer, sources.client_id) {
        (Some(issuer), Some(client_id)) => out.providers.push(provider(
            "QUARRY_OIDC_ISSUER",
            ProviderFields {
                name: "oidc".into(),
                title: None,
                issuer: issuer.into(),
                client_id: client_id.into(),
                client_secret: sources.client_secret.map(str::to_owned),
                scopes: None,
                groups_claim: None,
                allowed_domains: Vec::new(),
                required_claim: None,
                rules: Vec::new(),
            },
        )?),
        (Some(_), None) => {
            return Err(
                "QUARRY_OIDC_ISSUER is set but QUARRY_OIDC_CLIENT_ID is not: set the client id Quarry is registered under at the provider".into(),
            );
        }
        (None, Some(_)) => {
            return Err("QUARRY_OIDC_CLIENT_ID is set but QUARRY_OIDC_ISSUER is not".into());
        }
        (None, None) => {}
    }
    for (i, p) in out.providers.iter().enumerate() {
        if out.providers[..i].iter().any(|q| q.name == p.name) {
            return Err(format!(
                "two identity providers are named '{}': names must differ",
                p.name
            ));
        }
    }
    Ok(out)
}

fn minutes_to_ms(m: f64) -> i64 {
    (m * 60_000.0).round() as i64
}

struct ProviderFields {
    name: String,
    title: Option<String>,
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    scopes: Option<Vec<String>>,
    groups_claim: Option<String>,
    allowed_domains: Vec<String>,
    required_claim: Option<RequiredClaim>,
    rules: Vec<GroupRule>,
}

fn provider(where_: &str, f: ProviderFields) -> Result<ProviderConfig, String> {
    let name_ok = !f.name.is_empty()
        && f.name.len() <= 32
        && f.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !name_ok {
        return Err(format!(
            "{where_}: a provider's name is 1 to 32 lowercase letters, digits or '-'"
        ));
    }
    check_endpoint(where_, "issuer", &f.issuer)?;
    if f.client_id.trim().is_empty() {
        return Err(format!("{where_}: client_id is empty"));
    }
    let mut scopes = f.scopes.unwrap_or_else(|| {
        ["openid", "email", "profile"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    });
    if !scopes.iter().any(|s| s == "openid") {
        scopes.insert(0, "openid".into());
    }
    if let Some(bad) = scopes
        .iter()
        .find(|s| s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(format!("{where_}: scope {bad:?} is not one word"));
    }
    let allowed_domains: Vec<String> = f
        .allowed_domains
        .iter()
        .map(|d| d.trim().trim_start_matches('@').to_ascii_lowercase())
        .collect();
    if allowed_domains
        .iter()
        .any(|d| d.is_empty() || d.contains('@'))
    {
        return Err(format!(
            "{where_}: allowed_domains are domain names (example.com)"
        ));
    }
    Ok(ProviderConfig {
        title: f
            .title
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| format!("Sign in with {}", f.name)),
        name: f.name,
        issuer: f.issuer,
        client_id: f.client_id,
        client_secret: f.client_secret.filter(|s| !s.is_empty()).map(ClientSecret),
        scopes,
        groups_claim: f
            .groups_claim
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "groups".into()),
        allowed_domains,
        required_claim: f.required_claim,
        rules: f.rules,
    })
}

fn rule(where_: &str, r: FileRule) -> Result<GroupRule, String> {
    if r.group.is_empty() || r.space.is_empty() {
        return Err(format!("{where_}: a group rule needs a group and a space"));
    }
    let role = r
        .role
        .as_deref()
        .map(|s| {
            Role::parse(s).ok_or_else(|| {
                format!(
                    "{where_}: group '{}': role {s:?} is not viewer, editor, admin or owner",
                    r.group
                )
            })
        })
        .transpose()?;
    if role.is_none() && r.reader_groups.is_empty() {
        return Err(format!(
            "{where_}: group '{}' gives neither a role nor reader groups",
            r.group
        ));
    }
    for g in &r.reader_groups {
        quarry_access::validate_group_name(g).map_err(|e| format!("{where_}: {e}"))?;
    }
    Ok(GroupRule {
        group: r.group,
        space: r.space,
        role,
        reader_groups: r.reader_groups,
    })
}

/// Whether `host` is this machine (where plain HTTP is allowed: a provider in a test, or
/// one behind a local proxy).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// An endpoint of the provider: an absolute `https` URL (`http` on loopback only), no
/// credentials, no fragment.
pub(crate) fn check_endpoint(where_: &str, what: &str, raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("{where_}: {what} {raw:?} is not a URL: {e}"))?;
    let host = url.host_str().unwrap_or_default();
    let scheme_ok = match url.scheme() {
        "https" => true,
        "http" => is_loopback_host(host),
        _ => false,
    };
    if !scheme_ok || host.is_empty() {
        return Err(format!(
            "{where_}: {what} {raw:?} must be an https URL (http only on this machine)"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{where_}: {what} {raw:?} must not carry credentials or a fragment"
        ));
    }
    Ok(url)
}
