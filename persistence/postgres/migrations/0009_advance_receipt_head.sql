-- Advances a tenant's chain head from (from_seq, from_hash) to (to_seq,
-- to_hash), creating it when from_seq is 0, and raises SQLSTATE SVC01 when
-- the head is elsewhere. A group commit whose receipts were sealed ahead of
-- time (a lone node seals on arrival) sends its rows and this call with
-- COMMIT, in one round trip, instead of first reading and locking the head
-- and then sending the rows (two). When the head is not where the receipts
-- continue it (a write before them failed, or another node wrote), the
-- transaction rolls back and the group commit is written again with the
-- head locked first and its receipts resealed: the head stays the arbiter,
-- and a chain cannot fork.
CREATE FUNCTION svc_advance_receipt_head(t TEXT, from_seq BIGINT, from_hash TEXT, to_seq BIGINT, to_hash TEXT)
RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    IF from_seq = 0 THEN
        INSERT INTO receipt_heads (tenant_id, seq, hash) VALUES (t, to_seq, to_hash)
        ON CONFLICT (tenant_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
        WHERE receipt_heads.seq = 0 AND receipt_heads.hash = from_hash;
    ELSE
        UPDATE receipt_heads SET seq = to_seq, hash = to_hash
        WHERE tenant_id = t AND seq = from_seq AND hash = from_hash;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt chain head of tenant % is not at seq %', t, from_seq USING ERRCODE = 'SVC01';
    END IF;
END
$$;
