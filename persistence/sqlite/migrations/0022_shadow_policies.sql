-- Shadow policies (CONTRACT §18): a tenant policy in mode 'shadow' runs on
-- every live call and never decides; decisions.shadow keeps what each
-- shadow policy alone would have added (a JSON array of {policy,
-- decision}), NULL when no shadow policy fired.
ALTER TABLE tenant_policies ADD COLUMN mode TEXT NOT NULL DEFAULT 'enforce';
ALTER TABLE decisions ADD COLUMN shadow TEXT;
