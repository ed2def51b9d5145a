CREATE TABLE IF NOT EXISTS hub_upstreams (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    package TEXT NOT NULL,
    transport TEXT NOT NULL,
    config TEXT NOT NULL,
    options TEXT NOT NULL,
    secrets TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (owner, name),
    UNIQUE (owner, package)
);
CREATE TABLE IF NOT EXISTS hub_packages (
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    category TEXT NOT NULL,
    tags TEXT NOT NULL,
    kind TEXT NOT NULL,
    upstream_id TEXT REFERENCES hub_upstreams(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    schema_version TEXT NOT NULL,
    manifest TEXT,
    updated_at INTEGER NOT NULL,
    surface TEXT,
    PRIMARY KEY (owner, id)
);
-- Seed 002's tool_catalog: UNIQUE(package, tool) and UNIQUE(full_name), per owner.
CREATE TABLE IF NOT EXISTS hub_tools (
    owner TEXT NOT NULL,
    package TEXT NOT NULL,
    tool TEXT NOT NULL,
    full_name TEXT NOT NULL,
    description TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    raw TEXT NOT NULL,
    category TEXT NOT NULL,
    tags TEXT NOT NULL,
    source TEXT NOT NULL,
    schema_version TEXT NOT NULL,
    requires_task INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (owner, package, tool),
    UNIQUE (owner, full_name),
    FOREIGN KEY (owner, package) REFERENCES hub_packages(owner, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS hub_disabled_tools (
    owner TEXT NOT NULL,
    full_name TEXT NOT NULL,
    PRIMARY KEY (owner, full_name)
);
CREATE TABLE IF NOT EXISTS hub_custom_tools (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    secrets TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (owner, name)
);
CREATE TABLE IF NOT EXISTS hub_generations (
    owner TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
