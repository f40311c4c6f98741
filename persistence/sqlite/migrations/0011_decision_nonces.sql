-- The replay nonce of a decision (SPEC 4.2 rule 13), so that the nonces of
-- the last replay window can be rebuilt into the shared state when a node
-- starts (a lone node keeps them in process; Valkey is rebuildable too).
-- Only decisions with a nonce enter the index.
ALTER TABLE decisions ADD COLUMN nonce TEXT;
CREATE INDEX decisions_nonce_recent ON decisions (created_at) WHERE nonce IS NOT NULL;
