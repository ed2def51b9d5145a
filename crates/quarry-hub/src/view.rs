//! Views: what one MCP endpoint exposes (SPEC §1 "View"): the caller's catalog × the URL's
//! selection (`?tools=`, `?servers=`, `?pin=`, `?mode=search`) × the owner's toggles, capped.
//!
//! A view is computed from the request alone (URL + credentials), never from session
//! state, so a stateless 2026-07-28 client, a 2025-11-25 session and another replica all
//! see the same tools. `tools/call` resolves names only inside the view: a hidden tool is
//! exactly as unknown as a tool that does not exist.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use quarry_core::Principal;
use quarry_rank::{KeywordShare, StandardScores, standard_fusion};
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::catalog::{Catalog, CatalogTool};
use crate::endpoint::ToolOverride;
use crate::names::Selection;

// The meta-tools' names live with the naming rules, which endpoints check them against too.
pub use crate::names::{CALL_TOOL, SEARCH_TOOLS};

/// How `search_tools` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// BM25 over names, descriptions, categories, tags and the package.
    Keyword,
    /// Cosine similarity of the tools' and the query's vectors.
    Vector,
    /// Both, by their standard scores weighed per query (`fuse` in this module).
    Hybrid,
}

impl SearchMode {
    /// `keyword`, `vector` or `hybrid`.
    pub fn parse(s: &str) -> Option<SearchMode> {
        match s {
            "keyword" => Some(SearchMode::Keyword),
            "vector" => Some(SearchMode::Vector),
            "hybrid" => Some(SearchMode::Hybrid),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Keyword => "keyword",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

/// The keyword list's share of a hybrid tool ranking ([`fuse`]): σ(0.25 + 0.25·(z_keyword −
/// z_vector)), the leaders' standard scores, so 0.56 when both leaders stand out alike.
/// The passages' share ([`quarry_rank::SHARE`], fitted on longer documents) gives a typical
/// task 0.8–0.9 keyword weight (its keyword leader covers 0.2–0.35 of it): on `eval/tools/`
/// it lost Hit@5 0.740 → 0.725 with all-MiniLM-L6-v2 against reciprocal-rank fusion, where
/// this share reaches 0.760 (multilingual-e5-small: 0.725 both, Hit@1 0.459 against 0.490).
/// A tool's text is a name and a line or two, and a task shares common words with dozens of
/// them, so the leader's coverage says little about whether it is right: over a grid of the
/// passages' form on those 516 tasks with both models, the best points with and without a
/// coverage weight lie within two tasks of each other. This share keeps the passages' lead
/// term, which favours the list whose leader stands out (eval/tools/README.md).
const TOOL_SHARE: KeywordShare = KeywordShare {
    intercept: 0.25,
    coverage: 0.0,
    lead: 0.25,
};

/// Hybrid tool search's rank keys: each list's raw scores (BM25, cosine similarity)
/// standardised over its own top `quarry_rank::EVIDENCE_DEPTH` (a tool a list did not have
/// at its floor), weighed by the query's keyword share ([`TOOL_SHARE`]) — the arithmetic
/// of the knowledge base's passage fusion. A tool far above the rest of one list keeps its
/// lead whatever the other says, where reciprocal-rank fusion averaged ranks: a long task
/// matching dozens of tools by common words pushed vector search's clear first out of the
/// top 5. Inputs best first; the output in no order, in standard-score units.
fn fuse(keyword: &[(usize, f64)], coverage: f64, vector: &[(usize, f64)]) -> Vec<(usize, f64)> {
    let (kz, vz) = (standard(keyword), standard(vector));
    let leader =
        |z: &StandardScores, l: &[(usize, f64)]| l.first().map_or(0.0, |&(_, s)| z.z(Some(s)));
    let share = TOOL_SHARE.of(coverage, leader(&kz, keyword), leader(&vz, vector));
    let mut both: HashMap<usize, (Option<f64>, Option<f64>)> = HashMap::new();
    for &(i, s) in keyword {
        both.entry(i).or_default().0 = Some(s);
    }
    for &(i, s) in vector {
        both.entry(i).or_default().1 = Some(s);
    }
    both.into_iter()
        .map(|(i, (k, v))| (i, standard_fusion(share, kz.z(k), vz.z(v))))
        .collect()
}

/// The standard scores of a list of (tool, raw score), best first.
fn standard(list: &[(usize, f64)]) -> StandardScores {
    StandardScores::of(&list.iter().map(|&(_, s)| s).collect::<Vec<f64>>())
}

/// How close, in standard scores, another package's tool must come to the tool it would
/// pass over for [`diversify`] to take it.
const DIVERSITY_MARGIN: f64 = 0.25;

/// The first `limit` tools of `ranked` (best first, with rank keys in standard-score
/// units), no package holding more than `limit − 1` of them (at least 1) while another
/// package has a tool scoring within [`DIVERSITY_MARGIN`] of the one it would pass over:
/// place by place, the best tool left, unless its package already holds its share and the
/// best tool left of a package that does not is that close, which then takes the place. A
/// task with several needs ("open a GitHub issue and tell the team on Slack") no longer gets
/// five look-alike tools of one server; a task about one server keeps them wherever no
/// other server comes close, and a scope of one package is never changed.
fn diversify<'a>(
    ranked: &[(usize, f64)],
    limit: usize,
    package: impl Fn(usize) -> &'a str,
) -> Vec<usize> {
    let cap = limit.saturating_sub(1).max(1);
    let mut taken = vec![false; ranked.len()];
    let mut held: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(limit);
    while out.len() < limit {
        let Some(best) = taken.iter().position(|t| !t) else {
            break;
        };
        let full = |j: usize| held.get(package(ranked[j].0)).copied().unwrap_or(0) >= cap;
        let pick = if full(best) {
            (best + 1..ranked.len())
                .find(|&j| !taken[j] && !full(j))
                .filter(|&j| ranked[j].1 >= ranked[best].1 - DIVERSITY_MARGIN)
                .unwrap_or(best)
        } else {
            best
        };
        taken[pick] = true;
        *held.entry(package(ranked[pick].0)).or_default() += 1;
        out.push(ranked[pick].0);
    }
    out
}

/// Cosine similarity at or below which a tool is not a vector match.
const MIN_COSINE: f32 = 0.0;

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Most results `search_tools` returns.
pub const SEARCH_LIMIT_MAX: usize = 10;

/// What an endpoint shows when the URL selects nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultView {
    /// One package under its tools' own names (`/mcp`: the knowledge tools, as QMD lists them).
    BarePackage(String),
    /// Every enabled tool of the caller (`/api/mcp`, seed 002's full session).
    Everything,
}

/// Why a selection cannot become a view (HTTP 400; the text is for the person who wrote
/// the URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewError {
    /// The URL names a tool the caller's catalog lacks (or that is switched off).
    UnknownTool(String),
    /// The URL names a package the caller's catalog lacks.
    UnknownPackage(String),
    /// More tools than the endpoint's cap.
    TooMany {
        /// Tools selected.
        count: usize,
        /// The cap.
        cap: usize,
    },
    /// The selection cannot be read.
    Invalid(String),
}

impl std::fmt::Display for ViewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ViewError::UnknownTool(t) => write!(
                f,
                "unknown tool '{t}' in ?tools= (use package.tool names from /api/catalog)"
            ),
            ViewError::UnknownPackage(p) => write!(
                f,
                "unknown package '{p}' in ?servers= (see /api/catalog for package ids)"
            ),
            ViewError::TooMany { count, cap } => write!(
                f,
                "this selection exposes {count} tools, more than this server's cap of {cap} tools per endpoint; choose fewer with ?tools=package.tool,… or ?servers=package,…, or use ?mode=search"
            ),
            ViewError::Invalid(m) => f.write_str(m),
        }
    }
}

/// One endpoint's tools.
pub struct View {
    catalog: Arc<Catalog>,
    /// Listed tools (catalog positions), in order.
    listed: Vec<usize>,
    /// Everything `call_tool` may reach in search mode (equals `listed` otherwise).
    scope: Vec<usize>,
    /// Tools keep their own names (the default view of `/mcp`).
    bare: bool,
    search_mode: bool,
    /// Packages whose resources and prompts the endpoint offers: those chosen whole
    /// (`?servers=`, or all for `/api/mcp` without a selection).
    whole_packages: Vec<String>,
    /// A named endpoint's new names and descriptions, by catalog name (only tools of the
    /// scope; see [`View::with_overrides`]).
    overrides: BTreeMap<String, ToolOverride>,
}

impl View {
    /// Computes the view for `selection` as `caller` may see it: its token's tool scope and
    /// read-only rule ([`crate::may_use`]) apply here, once for every surface; `allowed`
    /// narrows further (e.g. a caller that may not write loses the knowledge write tools).
    /// What the caller may not use is as unknown as what does not exist.
    pub fn compute(
        catalog: Arc<Catalog>,
        selection: &Selection,
        default: &DefaultView,
        caller: &Principal,
        allowed: &dyn Fn(&CatalogTool) -> bool,
        cap: usize,
    ) -> Result<View, ViewError> {
        let allowed = |t: &CatalogTool| crate::access::may_use(caller, t) && allowed(t);
        let usable = |t: &CatalogTool| t.enabled && t.available && !t.requires_task && allowed(t);
        let mut chosen: BTreeSet<usize> = BTreeSet::new();
        let mut bare = false;
        if selection.tools.is_none() && selection.servers.is_none() {
            match default {
                DefaultView::BarePackage(p) => {
                    bare = !selection.search_mode && selection.pin.is_empty();
                    for (i, t) in catalog.tools.iter().enumerate() {
                        if &t.package == p && usable(t) {
                            chosen.insert(i);
                        }
                    }
                }
                DefaultView::Everything => {
                    for (i, t) in catalog.tools.iter().enumerate() {
                        if usable(t) {
                            chosen.insert(i);
                        }
                    }
                }
            }
        }
        for name in selection.tools.iter().flatten() {
            let i = position(&catalog, name).ok_or_else(|| ViewError::UnknownTool(name.clone()))?;
            // A tool the caller may not use is as unknown as a missing one.
            if !allowed(&catalog.tools[i]) {
                return Err(ViewError::UnknownTool(name.clone()));
            }
            if usable(&catalog.tools[i]) {
                chosen.insert(i);
            }
        }
        for p in selection.servers.iter().flatten() {
            if catalog.package(p).is_none() || !caller.reaches_package(p) {
                return Err(ViewError::UnknownPackage(p.clone()));
            }
            for (i, t) in catalog.tools.iter().enumerate() {
                if &t.package == p && usable(t) {
                    chosen.insert(i);
                }
            }
        }
        let scope: Vec<usize> = chosen.into_iter().collect();
        let mut pinned = Vec::new();
        for name in &selection.pin {
            let i = position(&catalog, name)
                .filter(|&i| allowed(&catalog.tools[i]))
                .ok_or_else(|| ViewError::UnknownTool(name.clone()))?;
            if !scope.contains(&i) {
                return Err(ViewError::Invalid(format!(
                    "pinned tool '{name}' is not in this endpoint's selection"
                )));
            }
            if !pinned.contains(&i) {
                pinned.push(i);
            }
        }
        let listed = if selection.search_mode {
            pinned.sort_unstable();
            pinned
        } else {
            scope.clone()
        };
        if selection.own_names {
            let mut seen = std::collections::HashSet::new();
            for &i in &listed {
                let name = catalog.tools[i].name.as_str();
                if name.is_empty()
                    || name.len() > 64
                    || !name.chars().all(crate::names::wire_char_ok)
                {
                    return Err(ViewError::Invalid(format!(
                        "names=tool: '{}' is not a name every client accepts; leave names=tool out",
                        catalog.tools[i].full_name
                    )));
                }
                if (selection.search_mode && (name == SEARCH_TOOLS || name == CALL_TOOL))
                    || !seen.insert(name)
                {
                    return Err(ViewError::Invalid(format!(
                        "names=tool: more than one selected tool is called '{name}'; leave names=tool out"
                    )));
                }
            }
            bare = true;
        }
        let count = listed.len() + if selection.search_mode { 2 } else { 0 };
        if count > cap {
            return Err(ViewError::TooMany { count, cap });
        }
        let mut whole_packages: Vec<String> = match (&selection.tools, &selection.servers, default)
        {
            (None, None, DefaultView::Everything) => {
                catalog.packages.iter().map(|p| p.id.clone()).collect()
            }
            (None, None, DefaultView::BarePackage(p)) => vec![p.clone()],
            _ => selection.servers.clone().unwrap_or_default(),
        };
        // A package's resources and prompts go only to callers whose scope names it whole.
        whole_packages.retain(|p| caller.may_use_package(p));
        // A disabled server offers nothing.
        whole_packages.retain(|p| {
            catalog
                .tools
                .iter()
                .filter(|t| &t.package == p)
                .all(|t| t.available)
        });
        whole_packages.sort();
        whole_packages.dedup();
        Ok(View {
            catalog,
            listed,
            scope,
            bare,
            search_mode: selection.search_mode,
            whole_packages,
            overrides: BTreeMap::new(),
        })
    }

    /// The view with a named endpoint's overrides ([`crate::EndpointSelection::overrides`]):
    /// it lists each overridden tool under its new name and with its new description (its
    /// title and everything else unchanged), `search_tools` returns them so, and
    /// [`View::resolve`] finds a renamed tool by its new name or its catalog name
    /// (`package.tool`) — no longer by the name it had (its wire name, or its own name with
    /// `?names=tool`), so an agent sees one name per tool.
    ///
    /// Refused, with a message naming the tool: a tool that is not in this view's scope, an
    /// override [`crate::endpoint::check_override`] refuses, and a new name another tool of
    /// the scope answers to (its listed name or its wire name) or that two tools are given.
    pub fn with_overrides(
        mut self,
        overrides: &BTreeMap<String, ToolOverride>,
    ) -> Result<View, ViewError> {
        if overrides.is_empty() {
            return Ok(self);
        }
        for (full_name, o) in overrides {
            if !self.reaches(full_name) {
                return Err(ViewError::Invalid(format!(
                    "override of '{full_name}': not a tool of this endpoint's selection (use the package.tool name of a tool it selects)"
                )));
            }
            crate::endpoint::check_override(full_name, o).map_err(ViewError::Invalid)?;
        }
        self.check_new_names(overrides)?;
        self.overrides = overrides.clone();
        Ok(self)
    }

    /// Refuses a new name another tool of the scope that keeps its name answers to (its
    /// listed name or its wire name), and one given to two tools.
    fn check_new_names(&self, overrides: &BTreeMap<String, ToolOverride>) -> Result<(), ViewError> {
        let is_renamed =
            |full_name: &str| overrides.get(full_name).is_some_and(|o| o.name.is_some());
        // What every tool that keeps its name answers to, and whose name it is.
        let mut taken: HashMap<&str, &str> = HashMap::new();
        for &i in &self.scope {
            let t = &self.catalog.tools[i];
            if is_renamed(t.full_name.as_str()) {
                continue;
            }
            if self.bare {
                taken.insert(t.name.as_str(), t.full_name.as_str());
            }
            taken.insert(t.wire_name.as_str(), t.full_name.as_str());
        }
        let mut new_names: HashMap<&str, &str> = HashMap::new();
        for (full_name, o) in overrides {
            let Some(name) = o.name.as_deref() else {
                continue;
            };
            if let Some(other) = taken.get(name) {
                return Err(ViewError::Invalid(format!(
                    "cannot rename '{full_name}' to '{name}': tool '{other}' of this endpoint is already called that"
                )));
            }
            if let Some(other) = new_names.insert(name, full_name.as_str()) {
                return Err(ViewError::Invalid(format!(
                    "cannot rename '{full_name}' to '{name}': '{other}' is renamed '{name}' too"
                )));
            }
        }
        Ok(())
    }

    /// The override of the tool at catalog position `i`, if it is renamed: its new name.
    fn new_name(&self, i: usize) -> Option<&str> {
        self.renamed(&self.catalog.tools[i])
    }

    /// The name this endpoint gives `tool` instead of its own, if it renames it.
    pub fn renamed(&self, tool: &CatalogTool) -> Option<&str> {
        self.overrides
            .get(&tool.full_name)
            .and_then(|o| o.name.as_deref())
    }

    /// The description this endpoint gives `tool` instead of its own, if it replaces it.
    pub fn described(&self, tool: &CatalogTool) -> Option<&str> {
        self.overrides
            .get(&tool.full_name)
            .and_then(|o| o.description.as_deref())
    }

    /// `tool` as this view lists it: under its wire name (its own with `?names=tool`) or the
    /// endpoint's new name, with the endpoint's description if it has one.
    pub fn exposed(&self, tool: &CatalogTool) -> Tool {
        let mut t = tool.exposed(self.bare);
        if let Some(o) = self.overrides.get(&tool.full_name) {
            if let Some(name) = &o.name {
                t.name = name.clone().into();
            }
            if let Some(description) = &o.description {
                t.description = Some(description.clone().into());
            }
        }
        t
    }

    /// The catalog the view was computed from.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Whether this view lists or lets `call_tool` reach the tool named `package.tool`.
    pub fn reaches(&self, full_name: &str) -> bool {
        self.scope
            .iter()
            .any(|&i| self.catalog.tools[i].full_name == full_name)
    }

    /// Whether the endpoint is in search mode (`search_tools` and `call_tool`).
    pub fn is_search_mode(&self) -> bool {
        self.search_mode
    }

    /// Whether the endpoint offers `package` whole (its resources and prompts).
    pub fn offers_package(&self, package: &str) -> bool {
        self.whole_packages.iter().any(|p| p == package)
    }

    fn surfaces(&self) -> impl Iterator<Item = &crate::catalog::Package> {
        self.whole_packages
            .iter()
            .filter_map(|p| self.catalog.package(p))
    }

    /// The offered packages' resources (their URIs are the upstreams' own).
    pub fn resources(&self) -> Vec<rmcp::model::Resource> {
        self.surfaces()
            .flat_map(|p| p.surface.resources.iter().cloned())
            .collect()
    }

    /// The offered packages' resource templates.
    pub fn resource_templates(&self) -> Vec<rmcp::model::ResourceTemplate> {
        self.surfaces()
            .flat_map(|p| p.surface.resource_templates.iter().cloned())
            .collect()
    }

    /// The offered packages' prompts under `package__prompt` (their own names with
    /// `?names=tool`).
    pub fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        self.surfaces()
            .flat_map(|p| {
                p.surface.prompts.iter().map(move |pr| {
                    let mut pr = pr.clone();
                    if !self.bare {
                        pr.name = crate::names::wire_name(&p.id, &pr.name, usize::MAX);
                    }
                    pr
                })
            })
            .collect()
    }

    /// The package and upstream name of an offered prompt.
    pub fn resolve_prompt(&self, name: &str) -> Option<(String, String)> {
        self.surfaces().find_map(|p| {
            p.surface.prompts.iter().find_map(|pr| {
                let exposed = if self.bare {
                    pr.name.clone()
                } else {
                    crate::names::wire_name(&p.id, &pr.name, usize::MAX)
                };
                (exposed == name).then(|| (p.id.clone(), pr.name.clone()))
            })
        })
    }

    /// The offered package a resource URI belongs to: one listing it, else one with a
    /// template whose fixed prefix it starts with.
    pub fn resource_package(&self, uri: &str) -> Option<String> {
        self.surfaces()
            .find(|p| p.surface.resources.iter().any(|r| r.uri == uri))
            .or_else(|| {
                self.surfaces().find(|p| {
                    p.surface.resource_templates.iter().any(|t| {
                        let prefix = t.uri_template.split('{').next().unwrap_or("");
                        !prefix.is_empty() && uri.starts_with(prefix)
                    })
                })
            })
            .map(|p| p.id.clone())
    }

    /// Tool definitions for `tools/list`, in a fixed order.
    pub fn list(&self) -> Vec<Tool> {
        let mut out: Vec<Tool> = self
            .listed
            .iter()
            .map(|&i| self.exposed(&self.catalog.tools[i]))
            .collect();
        if self.search_mode {
            out.insert(0, self.search_tools_tool());
            out.insert(1, self.call_tool_tool());
        }
        out
    }

    /// The tool `name` refers to, if the view reaches it (by its exposed name, its wire name
    /// or its catalog name): a listed tool, or in search mode any tool of the scope, so a
    /// name `search_tools` returned can be called directly as well as through `call_tool`.
    /// A tool the endpoint renamed answers to its new name and its catalog name only.
    /// Meta-tools are not catalog tools and resolve to `None`.
    pub fn resolve(&self, name: &str) -> Option<&CatalogTool> {
        let set = &self.scope;
        // Only an endpoint with overrides pays for looking through them.
        if !self.overrides.is_empty()
            && let Some(&i) = set.iter().find(|&&i| self.new_name(i) == Some(name))
        {
            return Some(&self.catalog.tools[i]);
        }
        let i = if self.bare {
            set.iter()
                .copied()
                .find(|&i| self.catalog.tools[i].name == name && self.new_name(i).is_none())
        } else {
            None
        }
        .or_else(|| position(&self.catalog, name).filter(|i| set.binary_search(i).is_ok()))?;
        let tool = &self.catalog.tools[i];
        if self.new_name(i).is_some() && name != tool.full_name {
            return None;
        }
        Some(tool)
    }

    /// `search_tools`: the best tools of the scope for `query`, with full schemas. With
    /// `vectors` (each catalog tool's vector and the query's), `mode` ranks by cosine
    /// similarity (`Vector`) or by both lists' standard scores (`Hybrid`, `fuse`); no
    /// package fills every place while another's tool comes close (`diversify`).
    pub fn search(
        &self,
        query: &str,
        category: Option<&str>,
        limit: usize,
        mode: SearchMode,
        vectors: Option<(&[Vec<f32>], &[f32])>,
    ) -> quarry_core::Result<Vec<&CatalogTool>> {
        let limit = limit.clamp(1, SEARCH_LIMIT_MAX);
        // Rank keys in standard-score units in every mode, for `diversify`'s margin (a
        // single list's standard scores keep its order).
        let in_units = |list: Vec<(usize, f64)>| -> Vec<(usize, f64)> {
            let z = standard(&list);
            list.into_iter().map(|(i, s)| (i, z.z(Some(s)))).collect()
        };
        let ranked: Vec<(usize, f64)> = match (mode, vectors) {
            (SearchMode::Keyword, _) | (_, None) => in_units(self.keyword_ranking(query)?.0),
            (SearchMode::Vector, Some((tools, q))) => in_units(self.vector_ranking(tools, q)),
            (SearchMode::Hybrid, Some((tools, q))) => {
                let (keyword, coverage) = self.keyword_ranking(query)?;
                let vector = self.vector_ranking(tools, q);
                self.best_first(fuse(&keyword, coverage, &vector))
            }
        };
        let tools = &self.catalog.tools;
        let ranked: Vec<(usize, f64)> = ranked
            .into_iter()
            .filter(|&(i, _)| category.is_none_or(|c| tools[i].category == c))
            .collect();
        Ok(diversify(&ranked, limit, |i| tools[i].package.as_str())
            .into_iter()
            .map(|i| &tools[i])
            .collect())
    }

    /// The scope's tools by cosine similarity to `query`, best first (ties by name).
    fn vector_ranking(&self, tools: &[Vec<f32>], query: &[f32]) -> Vec<(usize, f64)> {
        // At or below MIN_COSINE a tool has nothing to do with the query: keyword search
        // would not have listed it either.
        let scored: Vec<(usize, f64)> = self
            .scope
            .iter()
            .filter_map(|&i| {
                tools
                    .get(i)
                    .filter(|v| v.len() == query.len())
                    .map(|v| (i, cosine(v, query)))
            })
            .filter(|(_, s)| *s > MIN_COSINE)
            .map(|(i, s)| (i, f64::from(s)))
            .collect();
        self.best_first(scored)
    }

    /// Catalog positions with their scores, best first; equal scores (tools described
    /// alike) in one order every time, by name: an index's own order of ties depends on how
    /// its segments were written.
    fn best_first(&self, mut scored: Vec<(usize, f64)>) -> Vec<(usize, f64)> {
        scored.sort_by(|(a, sa), (b, sb)| {
            sb.total_cmp(sa).then_with(|| {
                self.catalog.tools[*a]
                    .full_name
                    .cmp(&self.catalog.tools[*b].full_name)
            })
        });
        scored
    }

    /// The scope's tools that match `query`'s words with their BM25 scores, best first
    /// (ties by name), and the query's keyword coverage (the best hit's share of the
    /// query's saturated maximum).
    fn keyword_ranking(&self, query: &str) -> quarry_core::Result<(Vec<(usize, f64)>, f64)> {
        let packages: BTreeSet<&str> = self
            .scope
            .iter()
            .map(|&i| self.catalog.tools[i].package.as_str())
            .collect();
        let packages: Vec<&str> = packages.into_iter().collect();
        let index = self.catalog.index()?;
        // Tool-level selections are narrower than packages: over-fetch, then keep the scope.
        let found = index.search_with_max(query, Some(&packages), self.scope.len().max(1))?;
        let hits: Vec<(usize, f64)> = found
            .hits
            .iter()
            .filter(|(i, _)| self.scope.binary_search(i).is_ok())
            .map(|&(i, s)| (i, f64::from(s)))
            .collect();
        // The scope's own best: a tool-level selection may leave out the index's.
        let coverage = hits.first().map_or(0.0, |&(_, s)| found.coverage(s));
        Ok((self.best_first(hits), coverage))
    }

    /// Categories and packages of the scope, for the meta-tools' descriptions (agents skip
    /// a meta-tool whose description says nothing about what it reaches).
    fn scope_summary(&self) -> String {
        let mut packages: Vec<(&str, &str, usize)> = Vec::new();
        for &i in &self.scope {
            let t = &self.catalog.tools[i];
            match packages.iter_mut().find(|(p, _, _)| *p == t.package) {
                Some(e) => e.2 += 1,
                None => packages.push((&t.package, &t.category, 1)),
            }
        }
        let mut categories: Vec<&str> = packages
            .iter()
            .map(|p| p.1)
            .filter(|c| !c.is_empty())
            .collect();
        categories.sort_unstable();
        categories.dedup();
        let list: Vec<String> = packages
            .iter()
            .map(|(p, _, n)| {
                let desc = self
                    .catalog
                    .package(p)
                    .map(|pk| pk.description.as_str())
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(": {}", d.chars().take(80).collect::<String>()))
                    .unwrap_or_default();
                format!("{p} ({n} tools){desc}")
            })
            .collect();
        format!(
            "{} tools in packages {}{}",
            self.scope.len(),
            list.join("; "),
            if categories.is_empty() {
                String::new()
            } else {
                format!(" (categories: {})", categories.join(", "))
            }
        )
    }

    fn search_tools_tool(&self) -> Tool {
        let mut t = Tool::default();
        t.name = SEARCH_TOOLS.into();
        t.title = Some("Search tools".into());
        t.description = Some(
            format!(
                "Find the right tool for a task among {}. Returns tool names with their full input schemas; call one with call_tool.",
                self.scope_summary()
            )
            .into(),
        );
        t.input_schema = Arc::new(object(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX, "default": 5},
                "category": {"type": "string", "description": "Only tools of this category"},
                "mode": {"type": "string", "enum": ["keyword", "vector", "hybrid"],
                         "description": "keyword (words), vector (meaning) or hybrid (both); default: hybrid where the server has an embedding model, else keyword"}
            },
            "required": ["query"]
        })));
        t
    }

    fn call_tool_tool(&self) -> Tool {
        let mut t = Tool::default();
        t.name = CALL_TOOL.into();
        t.title = Some("Call a tool".into());
        t.description = Some(
            format!(
                "Call a tool found with search_tools, by its name, with arguments matching its input schema. Reaches {}.",
                self.scope_summary()
            )
            .into(),
        );
        t.input_schema = Arc::new(object(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name as search_tools returned it"},
                "arguments": {"type": "object", "description": "The tool's arguments"}
            },
            "required": ["name"]
        })));
        t
    }
}

fn object(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// A catalog tool's position by catalog name or wire name.
fn position(catalog: &Catalog, name: &str) -> Option<usize> {
    catalog.position(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::BuiltinPackage;

    fn package(id: &str, tools: &[(&str, &str)]) -> BuiltinPackage {
        BuiltinPackage {
            id: id.into(),
            name: id.into(),
            description: String::new(),
            category: "dev".into(),
            tags: Vec::new(),
            tools: tools
                .iter()
                .map(|(name, description)| {
                    Tool::new(
                        name.to_string(),
                        description.to_string(),
                        Arc::new(object(json!({"type": "object"}))),
                    )
                    .with_title(format!("Title of {name}"))
                })
                .collect(),
        }
    }

    fn catalog() -> Arc<Catalog> {
        Arc::new(Catalog::build(
            0,
            &[
                package(
                    "time",
                    &[
                        ("get_current_time", "Current time"),
                        ("convert_time", "Convert"),
                    ],
                ),
                package("git", &[("git_log", "Commits"), ("git_status", "Status")]),
            ],
            Vec::new(),
            Vec::new(),
            &[],
            &[],
            48,
        ))
    }

    fn view(query: &str) -> View {
        View::compute(
            catalog(),
            &Selection::from_query(Some(query)).unwrap(),
            &DefaultView::Everything,
            &Principal::owner("default", ""),
            &|_| true,
            32,
        )
        .unwrap()
    }

    fn rename(pairs: &[(&str, Option<&str>, Option<&str>)]) -> BTreeMap<String, ToolOverride> {
        pairs
            .iter()
            .map(|(tool, name, description)| {
                (
                    tool.to_string(),
                    ToolOverride {
                        name: name.map(str::to_owned),
                        description: description.map(str::to_owned),
                    },
                )
            })
            .collect()
    }

    fn names(v: &View) -> Vec<String> {
        v.list().into_iter().map(|t| t.name.to_string()).collect()
    }

    #[test]
    fn a_renamed_tool_is_listed_and_called_by_its_new_name_only() {
        let v = view("servers=time")
            .with_overrides(&rename(&[(
                "time.get_current_time",
                Some("clock_now"),
                Some("现在几点：当前时间"),
            )]))
            .unwrap();
        let listed = v.list();
        assert_eq!(names(&v), ["time__convert_time", "clock_now"]);
        let clock = listed.iter().find(|t| t.name == "clock_now").unwrap();
        assert_eq!(clock.description.as_deref(), Some("现在几点：当前时间"));
        assert_eq!(
            clock.title.as_deref(),
            Some("Title of get_current_time"),
            "the title is the tool's own"
        );
        let convert = listed
            .iter()
            .find(|t| t.name == "time__convert_time")
            .unwrap();
        assert_eq!(convert.description.as_deref(), Some("Convert"));
        // The new name and the catalog name reach it; the old exposed name does not.
        assert_eq!(
            v.resolve("clock_now").map(|t| t.full_name.as_str()),
            Some("time.get_current_time")
        );
        assert_eq!(
            v.resolve("time.get_current_time")
                .map(|t| t.full_name.as_str()),
            Some("time.get_current_time")
        );
        assert!(v.resolve("time__get_current_time").is_none());
        assert!(v.resolve("get_current_time").is_none());
        // Others are untouched.
        assert_eq!(
            v.resolve("time__convert_time")
                .map(|t| t.full_name.as_str()),
            Some("time.convert_time")
        );
        let t = v.catalog().by_full_name("time.get_current_time").unwrap();
        assert_eq!(v.renamed(t), Some("clock_now"));
        assert_eq!(v.described(t), Some("现在几点：当前时间"));
        assert_eq!(v.exposed(t).name, "clock_now");
        let c = v.catalog().by_full_name("time.convert_time").unwrap();
        assert_eq!((v.renamed(c), v.described(c)), (None, None));
    }

    #[test]
    fn only_a_description_keeps_the_name() {
        let v = view("tools=git.git_log&names=tool")
            .with_overrides(&rename(&[(
                "git.git_log",
                None,
                Some("History of the repo"),
            )]))
            .unwrap();
        let listed = v.list();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "git_log");
        assert_eq!(
            listed[0].description.as_deref(),
            Some("History of the repo")
        );
        assert!(v.resolve("git_log").is_some());
    }

    #[test]
    fn renames_with_own_names_drop_the_own_name() {
        let v = view("servers=git&names=tool")
            .with_overrides(&rename(&[("git.git_log", Some("history"), None)]))
            .unwrap();
        assert_eq!(names(&v), ["history", "git_status"]);
        assert!(v.resolve("git_log").is_none());
        assert!(v.resolve("git__git_log").is_none());
        assert!(v.resolve("history").is_some());
        assert!(v.resolve("git_status").is_some());
    }

    #[test]
    fn search_mode_reaches_a_renamed_tool_by_its_new_name() {
        let v = view("servers=time,git&mode=search")
            .with_overrides(&rename(&[("git.git_log", Some("history"), None)]))
            .unwrap();
        assert_eq!(names(&v), [SEARCH_TOOLS, CALL_TOOL]);
        assert_eq!(
            v.resolve("history").map(|t| t.full_name.as_str()),
            Some("git.git_log")
        );
        assert!(v.resolve("git__git_log").is_none());
    }

    #[test]
    fn clashes_and_strangers_are_refused() {
        let err = |query: &str, o: BTreeMap<String, ToolOverride>| -> String {
            match view(query).with_overrides(&o) {
                Ok(_) => panic!("{o:?} was accepted"),
                Err(e) => e.to_string(),
            }
        };
        // Another listed tool's name.
        let e = err(
            "servers=time",
            rename(&[("time.get_current_time", Some("time__convert_time"), None)]),
        );
        assert!(
            e.contains("time.get_current_time") && e.contains("time.convert_time"),
            "{e}"
        );
        // With own names, another tool's own name.
        let e = err(
            "servers=git&names=tool",
            rename(&[("git.git_log", Some("git_status"), None)]),
        );
        assert!(
            e.contains("git.git_log") && e.contains("git.git_status"),
            "{e}"
        );
        // A tool search mode reaches but does not list.
        let e = err(
            "servers=time,git&mode=search",
            rename(&[("git.git_log", Some("git__git_status"), None)]),
        );
        assert!(e.contains("git.git_status"), "{e}");
        // Two tools, one new name.
        let e = err(
            "servers=git",
            rename(&[
                ("git.git_log", Some("same"), None),
                ("git.git_status", Some("same"), None),
            ]),
        );
        assert!(
            e.contains("git.git_log") && e.contains("git.git_status"),
            "{e}"
        );
        // A tool outside the selection, or one that does not exist.
        for stranger in ["git.git_log", "time.nosuch", "nosuch"] {
            let e = err("servers=time", rename(&[(stranger, Some("x"), None)]));
            assert!(
                e.contains(stranger) && e.contains("not a tool of this endpoint's selection"),
                "{e}"
            );
        }
        // What the override says on its own.
        let e = err("servers=time", rename(&[("time.convert_time", None, None)]));
        assert!(
            e.contains("time.convert_time") && e.contains("neither"),
            "{e}"
        );
        let e = err(
            "servers=time",
            rename(&[("time.convert_time", Some("call_tool"), None)]),
        );
        assert!(e.contains("call_tool"), "{e}");
        let e = err(
            "servers=time",
            rename(&[("time.convert_time", Some("bad name"), None)]),
        );
        assert!(e.contains("invalid new name"), "{e}");
        // Swapping two names is fine: each answers to its new one only.
        let v = view("servers=git&names=tool")
            .with_overrides(&rename(&[
                ("git.git_log", Some("git_status"), None),
                ("git.git_status", Some("git_log"), None),
            ]))
            .unwrap();
        assert_eq!(names(&v), ["git_status", "git_log"]);
        assert_eq!(
            v.resolve("git_status").map(|t| t.full_name.as_str()),
            Some("git.git_log")
        );
        assert_eq!(
            v.resolve("git_log").map(|t| t.full_name.as_str()),
            Some("git.git_status")
        );
        // Renaming a tool to its own old name is harmless.
        let v = view("servers=time")
            .with_overrides(&rename(&[(
                "time.convert_time",
                Some("time__convert_time"),
                None,
            )]))
            .unwrap();
        assert!(v.resolve("time__convert_time").is_some());
    }

    /// A catalog of `packages` (id, tools with descriptions) and a view of them in search
    /// mode through `query`.
    fn search_view(packages: &[(&str, &[(&str, &str)])], query: &str) -> View {
        let built: Vec<BuiltinPackage> = packages
            .iter()
            .map(|(id, tools)| package(id, tools))
            .collect();
        let catalog = Arc::new(Catalog::build(
            0,
            &built,
            Vec::new(),
            Vec::new(),
            &[],
            &[],
            48,
        ));
        View::compute(
            catalog,
            &Selection::from_query(Some(query)).unwrap(),
            &DefaultView::Everything,
            &Principal::owner("default", ""),
            &|_| true,
            32,
        )
        .unwrap()
    }

    /// Each catalog tool's vector: `near` (by catalog name) at the given cosine-like
    /// closeness to the query `[1, 0, …]`, every other tool spread over weak similarities.
    fn vectors_for(v: &View, near: &[(&str, f32)]) -> (Vec<Vec<f32>>, Vec<f32>) {
        let tools = v
            .catalog()
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let c = near
                    .iter()
                    .find(|(n, _)| *n == t.full_name)
                    .map_or(0.10 + 0.01 * (i % 7) as f32, |&(_, c)| c);
                vec![c, (1.0 - c * c).max(0.0).sqrt(), 0.0]
            })
            .collect();
        (tools, vec![1.0, 0.0, 0.0])
    }

    fn found(
        v: &View,
        query: &str,
        mode: SearchMode,
        vectors: &(Vec<Vec<f32>>, Vec<f32>),
    ) -> Vec<String> {
        v.search(query, None, 5, mode, Some((&vectors.0, &vectors.1)))
            .unwrap()
            .into_iter()
            .map(|t| t.full_name.clone())
            .collect()
    }

    const TRACKER: &[(&str, &str)] = &[
        ("release_notes", "Write release notes on a team page"),
        ("history", "Show the history of a team page"),
        ("move_to", "Move a team page to another space"),
        ("people_list", "List the people on a team page"),
        ("export", "Export a team page as a file"),
        ("view_count", "Number of views of a document"),
    ];

    #[test]
    fn hybrid_keeps_a_clear_vector_winner_first() {
        // The task shares common words with most tools, alike; none of them is what it asks.
        // Vector search puts the one tool that does far ahead of the rest.
        let v = search_view(&[("wiki", TRACKER)], "servers=wiki&mode=search");
        let query = "how often was our team page opened";
        let vectors = vectors_for(&v, &[("wiki.view_count", 0.90)]);
        let keyword = found(&v, query, SearchMode::Keyword, &vectors);
        assert!(
            !keyword.contains(&"wiki.view_count".to_string()),
            "{keyword:?}"
        );
        let hybrid = found(&v, query, SearchMode::Hybrid, &vectors);
        assert_eq!(hybrid[0], "wiki.view_count", "{hybrid:?}");
    }

    #[test]
    fn hybrid_keeps_an_exact_name_first() {
        // The task names a tool; the vectors like a neighbour a little better.
        let v = search_view(&[("wiki", TRACKER)], "servers=wiki&mode=search");
        let vectors = vectors_for(&v, &[("wiki.history", 0.62), ("wiki.people_list", 0.58)]);
        let hybrid = found(&v, "people_list", SearchMode::Hybrid, &vectors);
        assert_eq!(hybrid[0], "wiki.people_list", "{hybrid:?}");
        assert!(hybrid.contains(&"wiki.history".to_string()), "{hybrid:?}");
    }

    const CHAT: &[(&str, &str)] = &[
        ("send_message", "Send a message to a channel"),
        ("post_message", "Post a message in a channel"),
        ("reply_message", "Reply to a message in a thread"),
        ("schedule_message", "Schedule a message for later"),
        ("update_message", "Update a message you sent"),
        ("delete_message", "Delete a message"),
    ];
    const ISSUES: &[(&str, &str)] = &[
        ("create_issue", "Open a new issue in a repository"),
        ("list_commits", "List the commits of a branch"),
    ];

    #[test]
    fn a_task_with_two_needs_gets_both_servers() {
        let query = "send a message to the channel and open an issue";
        let v = search_view(
            &[("chat", CHAT), ("issues", ISSUES)],
            "servers=chat,issues&mode=search",
        );
        let vectors = vectors_for(
            &v,
            &[
                ("chat.send_message", 0.70),
                ("chat.post_message", 0.69),
                ("chat.reply_message", 0.64),
                ("chat.schedule_message", 0.62),
                ("chat.update_message", 0.60),
                ("issues.create_issue", 0.58),
            ],
        );
        for mode in [SearchMode::Keyword, SearchMode::Vector, SearchMode::Hybrid] {
            let top = found(&v, query, mode, &vectors);
            assert_eq!(top.len(), 5);
            assert!(
                top.contains(&"issues.create_issue".to_string()),
                "{mode:?} {top:?}"
            );
            assert!(top[0].starts_with("chat."), "{mode:?} {top:?}");
        }
        // Without the rule the vector list's first five are all one server's.
        let mut plain = v.vector_ranking(&vectors.0, &vectors.1);
        plain.truncate(5);
        assert!(
            plain
                .iter()
                .all(|&(i, _)| v.catalog().tools[i].package == "chat")
        );
    }

    #[test]
    fn one_package_scopes_keep_their_ranking() {
        let query = "send a message to the channel and open an issue";
        let v = search_view(
            &[("chat", CHAT), ("issues", ISSUES)],
            "servers=chat&mode=search",
        );
        let vectors = vectors_for(
            &v,
            &[("chat.send_message", 0.70), ("issues.create_issue", 0.9)],
        );
        let (keyword, coverage) = v.keyword_ranking(query).unwrap();
        let vector = v.vector_ranking(&vectors.0, &vectors.1);
        let expected: Vec<String> = v
            .best_first(fuse(&keyword, coverage, &vector))
            .into_iter()
            .take(5)
            .map(|(i, _)| v.catalog().tools[i].full_name.clone())
            .collect();
        assert_eq!(found(&v, query, SearchMode::Hybrid, &vectors), expected);
        assert!(
            expected.iter().all(|n| n.starts_with("chat.")),
            "{expected:?}"
        );
    }

    #[test]
    fn keyword_coverage_is_the_best_hits_share_of_the_query() {
        let v = search_view(&[("chat", CHAT)], "servers=chat&mode=search");
        let (hits, full) = v.keyword_ranking("send_message").unwrap();
        let (_, part) = v
            .keyword_ranking("send a message, then order pizza for the whole office")
            .unwrap();
        assert!(!hits.is_empty());
        assert!(full <= 1.0 && full > part && part > 0.0, "{full} {part}");
        assert_eq!(v.keyword_ranking("zzzz").unwrap(), (Vec::new(), 0.0));
    }

    #[test]
    fn diversify_yields_only_to_close_candidates() {
        let package = |i: usize| if i < 10 { "a" } else { "b" };
        // Five of `a` ahead of `b`'s best: within the margin it takes the fifth place.
        let ranked = [
            (0, 3.0),
            (1, 2.9),
            (2, 2.8),
            (3, 2.7),
            (4, 2.6),
            (10, 2.4),
            (5, 2.3),
        ];
        assert_eq!(diversify(&ranked, 5, package), [0, 1, 2, 3, 10]);
        // Too far behind: `a` keeps all five.
        let far = [(0, 3.0), (1, 2.9), (2, 2.8), (3, 2.7), (4, 2.6), (10, 1.0)];
        assert_eq!(diversify(&far, 5, package), [0, 1, 2, 3, 4]);
        // Only one package: nothing changes; fewer tools than places: all of them.
        let one = [(0, 3.0), (1, 2.9), (2, 2.8), (3, 2.7), (4, 2.6), (5, 2.5)];
        assert_eq!(diversify(&one, 5, package), [0, 1, 2, 3, 4]);
        assert_eq!(diversify(&one[..2], 5, package), [0, 1]);
        // One place: the best, whatever its package.
        assert_eq!(diversify(&ranked, 1, package), [0]);
        // Two places: one each when the second package comes close.
        assert_eq!(
            diversify(&[(0, 1.0), (1, 0.9), (10, 0.8)], 2, package),
            [0, 10]
        );
    }

    #[test]
    fn no_overrides_change_nothing() {
        let plain = view("servers=time,git");
        let same = view("servers=time,git")
            .with_overrides(&BTreeMap::new())
            .unwrap();
        assert_eq!(plain.list(), same.list());
        for name in ["time__get_current_time", "git.git_log", "nosuch"] {
            assert_eq!(
                plain.resolve(name).map(|t| t.full_name.clone()),
                same.resolve(name).map(|t| t.full_name.clone())
            );
        }
    }
}
