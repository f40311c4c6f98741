package httpapi

// The receipt log (CONTRACT §17): each tenant's receipts as the leaves of
// an RFC 6962 tree, its latest signed checkpoint, and the inclusion and
// consistency proofs against it (receiptlog; the leader's job appends and
// signs, actors.NewReceiptLogJob).

import (
	"encoding/base64"
	"errors"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"svc/actors"
	"svc/receiptlog"
)

func (s *Server) registerReceiptLog() {
	s.register(Route{Method: "GET", Path: "/receipts/checkpoint", Access: AccessAgentOrViewer, Tag: "receipts", RawBody: "text/plain; charset=utf-8",
		Resp: "", Errors: []int{404},
		Summary: "The tenant's latest receipt log checkpoint (CONTRACT §17): a C2SP tlog-checkpoint signed note (origin, tree size, base64 " +
			"RFC 6962 root; then the signature line made with the receipt key). It covers at least every receipt answered " +
			"SVC_CHECKPOINT_INTERVAL_SECS or more before, on any node. 404 while receipts are unsigned or before the tenant's first receipt.",
		Handle: s.receiptCheckpoint})
	s.register(Route{Method: "GET", Path: "/receipts/checkpoint/key", Access: AccessAgentOrViewer, Tag: "receipts", RawBody: "text/plain; charset=utf-8",
		Resp: "", Errors: []int{404},
		Summary: "The note verifier key of the tenant's checkpoints: <name>+<hex key hash>+<base64 key>, as golang.org/x/mod/sumdb/note " +
			"reads it (the receipt key, named as the log's origin). 404 while receipts are unsigned.",
		Handle: s.receiptCheckpointKey})
	s.register(Route{Method: "GET", Path: "/receipts/consistency", Access: AccessAgentOrViewer, Tag: "receipts", Resp: consistencyView{},
		Query: []QueryParam{{Name: "from", Type: "integer", Description: "the smaller tree size (at least 1)"},
			{Name: "to", Type: "integer", Description: "the larger tree size (at most the tree's)"}},
		Summary: "The RFC 6962 consistency proof that the tree of size from is a prefix of the tree of size to. A size beyond the tree " +
			"(or from greater than to, or below 1): 400.",
		Handle: s.receiptConsistency})
	s.register(Route{Method: "GET", Path: "/receipts/:receipt_id/inclusion", Access: AccessAgentOrViewer, Tag: "receipts", Resp: inclusionView{},
		Errors: []int{404}, Query: []QueryParam{{Name: "tree_size", Type: "integer",
			Description: "the tree to prove inclusion in (default: the latest checkpoint's size)"}},
		Summary: "The RFC 6962 inclusion proof (audit path) of one receipt, leaf seq-1 of its tenant's tree. A tree_size beyond the tree, or " +
			"one that does not hold the receipt yet: 400. An agent token reads the proofs of its own receipts only.",
		Handle: s.receiptInclusion})
}

type inclusionView struct {
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Hashes    []string `json:"hashes"`
}

type consistencyView struct {
	From   int64    `json:"from"`
	To     int64    `json:"to"`
	Hashes []string `json:"hashes"`
}

func base64Hashes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i := range hs {
		out[i] = base64.StdEncoding.EncodeToString(hs[i][:])
	}
	return out
}

// receiptCheckpoint serves GET /receipts/checkpoint.
func (s *Server) receiptCheckpoint(c *Call) (any, error) {
	if s.ReceiptSigner == nil {
		return nil, notFound("checkpoint (receipts are unsigned)")
	}
	cp, err := s.Store.LatestCheckpoint(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, orNotFound(err, "checkpoint")
	}
	return []byte(cp.Note), nil
}

// receiptCheckpointKey serves GET /receipts/checkpoint/key.
func (s *Server) receiptCheckpointKey(c *Call) (any, error) {
	if s.ReceiptSigner == nil {
		return nil, notFound("checkpoint key (receipts are unsigned)")
	}
	k, err := actors.LogKeys(s.cfg.LogOrigin, c.Principal.TenantID, s.ReceiptSigner)
	if err != nil {
		return nil, err
	}
	return []byte(k.VerifierKey + "\n"), nil
}

// sizeParam reads a tree size from the query: absent (0, false), or an
// integer of at least 1.
func sizeParam(c *Call, name string) (int64, bool, error) {
	raw := c.R.URL.Query().Get(name)
	if raw == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 {
		return 0, false, badRequest("invalid_tree_size", "%s must be an integer tree size of at least 1, not %q", name, raw)
	}
	return n, true, nil
}

// proofError maps a proof asked beyond the tree to 400.
func proofError(err error) error {
	if errors.Is(err, receiptlog.ErrBeyondTree) {
		return badRequest("beyond_tree", "%v", err)
	}
	return err
}

// receiptInclusion serves GET /receipts/:receipt_id/inclusion.
func (s *Server) receiptInclusion(c *Call) (any, error) {
	tenant := c.Principal.TenantID
	r, err := s.callersReceipt(c)
	if err != nil {
		return nil, err
	}
	size, given, err := sizeParam(c, "tree_size")
	if err != nil {
		return nil, err
	}
	if !given {
		cp, err := s.Store.LatestCheckpoint(c.Ctx(), tenant)
		if err != nil {
			return nil, orNotFound(err, "checkpoint")
		}
		size = cp.Size
	}
	p, err := receiptlog.Inclusion(c.Ctx(), s.Store, tenant, r.Seq, size)
	if err != nil {
		return nil, proofError(err)
	}
	return inclusionView{LeafIndex: r.Seq - 1, TreeSize: size, Hashes: base64Hashes(p)}, nil
}

// receiptConsistency serves GET /receipts/consistency.
func (s *Server) receiptConsistency(c *Call) (any, error) {
	from, fromGiven, err := sizeParam(c, "from")
	if err != nil {
		return nil, err
	}
	to, toGiven, err := sizeParam(c, "to")
	if err != nil {
		return nil, err
	}
	if !fromGiven || !toGiven {
		return nil, badRequest("invalid_tree_size", "from and to are both required")
	}
	p, err := receiptlog.Consistency(c.Ctx(), s.Store, c.Principal.TenantID, from, to)
	if err != nil {
		return nil, proofError(err)
	}
	return consistencyView{From: from, To: to, Hashes: base64Hashes(p)}, nil
}
