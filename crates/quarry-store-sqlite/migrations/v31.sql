-- Version 31 (issue 65 items 13, 14): a source's own network allowance, and what its last
-- refusal was made under. `allow_net` holds the address ranges (comma-separated, checked by
-- the engine) this source's syncs may reach besides public addresses and the server's
-- `--allow-net`: an owner allows one source's address without opening the whole server.
-- `refused_under` is the network policy of the node whose outbound address guard refused
-- the source's last sync (NULL when it was not refused): a node started with another policy
-- makes such sources due at once instead of leaving them to their back-off. Both live in
-- the store, as every node's scheduler reads them.
ALTER TABLE sources ADD COLUMN allow_net TEXT;
ALTER TABLE sources ADD COLUMN refused_under TEXT;
