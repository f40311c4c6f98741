package httpapi

// Receipts (SPEC 4.7): list, the public key, verification of one receipt
// and of the chain, and the signed export.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"svc/persistence"
	"svc/receipt"
)

// registerReceipts registers /receipts.
func (s *Server) registerReceipts() {
	s.register(Route{Method: "GET", Path: "/receipts", Access: AccessViewer, Tag: "receipts", Resp: []receipt.Receipt{}, Paginated: true,
		Summary: "The tenant's receipt chain, newest first.",
		Handle:  s.listReceipts})
	s.register(Route{Method: "GET", Path: "/receipts/public-key", Access: AccessAgentOrViewer, Tag: "receipts", Resp: publicKeyView{}, Errors: []int{404},
		Summary: "The Ed25519 public key receipts are signed with (404 when receipts are unsigned). Agents may read it too (CONTRACT §14), " +
			"to check the receipts of their own calls; an SDK should pin the key it got out of band rather than trust this answer alone.",
		Handle: s.receiptPublicKey})
	s.register(Route{Method: "GET", Path: "/receipts/:receipt_id", Access: AccessAgentOrViewer, Tag: "receipts", Resp: receipt.Receipt{}, Errors: []int{404},
		Summary: "One receipt (CONTRACT §13's shape), readable from any node as soon as its decision has been answered. An agent token " +
			"reads the receipts of its own decisions only (any other receipt: 404, the same body as an unknown id; CONTRACT §14). A " +
			"low-risk read-only allow answered before its commit (SPEC 4.2 rule 10) may be resealed if that commit fails; the receipt " +
			"of a mutating or protected call is final when it is answered.",
		Handle: s.getReceipt})
	s.register(Route{Method: "GET", Path: "/receipts/:receipt_id/verify", Access: AccessViewer, Tag: "receipts", Resp: verifyView{}, Errors: []int{404},
		Summary: "Recompute one receipt's hash and check its signature.",
		Handle:  s.verifyReceipt})
	s.register(Route{Method: "POST", Path: "/receipts/verify-chain", Access: AccessAdmin, Tag: "receipts", Body: &verifyChainReq{}, OptionalBody: true,
		Resp:    verifyChainView{},
		Summary: "Verify a chain: the receipts named by receipt_ids (in that order; each error's index is a position in receipt_ids), or seq from_seq..to_seq, or by default the whole chain. A range that reaches the stored chain head must end at it (receipts missing at the end are an error at the index after the last one checked). Always 200; failures are per-index entries of errors.",
		Handle:  s.verifyReceiptChain})
	s.register(Route{Method: "GET", Path: "/receipts/export", Access: AccessViewer, Tag: "receipts", RawBody: "application/x-ndjson", Resp: "",
		Summary: "The tenant's whole chain as JSON lines (a header line with the stored chain head, head_seq and head_hash, and, when receipts are signed, header_signature over the header; then one receipt per line in seq order up to that head): the input of `svc verify-receipts FILE`.",
		Handle:  s.exportReceipts})
}

type verifyView struct {
	ReceiptID      string  `json:"receipt_id" openapi:"format=uuid"`
	Valid          bool    `json:"valid"`
	HashValid      bool    `json:"hash_valid"`
	SignatureValid *bool   `json:"signature_valid"`
	Error          *string `json:"error"`
}

type verifyChainReq struct {
	ReceiptIDs []string `json:"receipt_ids" openapi:"maxItems=5000"`
	FromSeq    *int64   `json:"from_seq" openapi:"min=1"`
	ToSeq      *int64   `json:"to_seq" openapi:"min=1"`
}

type chainErrorView struct {
	Index     int    `json:"index"`
	ReceiptID string `json:"receipt_id"`
	Error     string `json:"error"`
}

type verifyChainView struct {
	Valid   bool             `json:"valid"`
	Checked int              `json:"checked"`
	Errors  []chainErrorView `json:"errors"`
}

type publicKeyView struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	Algorithm string `json:"algorithm" openapi:"enum=Ed25519"`
}

// viewReceipt is a receipt as the API and the export show it (CONTRACT §13):
// the receipt package's form, so both agree byte for byte.
func viewReceipt(r persistence.Receipt) receipt.Receipt { return r.Sealable(r.Seq) }

// chainPage is how many receipts verify-chain and the export read at a time.
const chainPage = 5000

// maxChainCheck bounds one verify-chain call.
const maxChainCheck = 1_000_000

// listReceipts serves GET /receipts.
func (s *Server) listReceipts(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.ListReceipts(c.Ctx(), c.Principal.TenantID, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(r persistence.Receipt) int64 { return r.Seq })
	return viewAll(rows, viewReceipt), nil
}

// receiptPublicKey serves GET /receipts/public-key.
func (s *Server) receiptPublicKey(*Call) (any, error) {
	if len(s.receiptKey) == 0 {
		return nil, notFound("receipt signing key (receipts are unsigned)")
	}
	return publicKeyView{KeyID: s.keyID, PublicKey: base64.StdEncoding.EncodeToString(s.receiptKey), Algorithm: "Ed25519"}, nil
}

// getReceipt serves GET /receipts/:receipt_id.
func (s *Server) getReceipt(c *Call) (any, error) {
	r, err := s.callersReceipt(c)
	if err != nil {
		return nil, err
	}
	return viewReceipt(r), nil
}

// callersReceipt reads the receipt named in the path as the caller may see
// it: an agent token only the receipts of its own decisions (any other:
// 404, as an unknown id).
func (s *Server) callersReceipt(c *Call) (persistence.Receipt, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return persistence.Receipt{}, err
	}
	r, err := s.Store.GetReceipt(c.Ctx(), c.Principal.TenantID, c.Param("receipt_id"))
	if err != nil {
		return r, orNotFound(err, "receipt")
	}
	if c.Principal.Kind == KindAgent {
		d, err := s.Store.GetDecision(c.Ctx(), c.Principal.TenantID, r.DecisionID)
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return r, err
		}
		if err != nil || d.AgentID != c.Principal.AgentID {
			return r, notFound("receipt")
		}
	}
	return r, nil
}

// verifyReceipt serves GET /receipts/:receipt_id/verify.
func (s *Server) verifyReceipt(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	r, err := s.Store.GetReceipt(c.Ctx(), c.Principal.TenantID, c.Param("receipt_id"))
	if err != nil {
		return nil, orNotFound(err, "receipt")
	}
	chk := receipt.Verify(r.Sealable(r.Seq), s.receiptKey)
	return verifyView{ReceiptID: r.ID, Valid: chk.Valid, HashValid: chk.HashValid, SignatureValid: chk.SignatureValid, Error: nullable(chk.Error)}, nil
}

// verifyReceiptChain serves POST /receipts/verify-chain.
func (s *Server) verifyReceiptChain(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	b := bodyOf[verifyChainReq](c)
	tenant := c.Principal.TenantID
	if len(b.ReceiptIDs) > 0 {
		if len(b.ReceiptIDs) > chainPage {
			return nil, invalidField("receipt_ids", "at most %d ids", chainPage)
		}
		rs, err := s.Store.ReceiptsByID(c.Ctx(), tenant, b.ReceiptIDs)
		if err != nil {
			return nil, err
		}
		out := verifyChainView{Errors: []chainErrorView{}}
		byID := make(map[string]receipt.Receipt, len(rs))
		for _, r := range rs {
			byID[r.ID] = viewReceipt(r)
		}
		// The receipts found, in the order asked, and where each was
		// asked: every error's index is a position in receipt_ids.
		var chain []receipt.Receipt
		var at []int
		for i, id := range b.ReceiptIDs {
			r, ok := byID[id]
			if !ok {
				out.Errors = append(out.Errors, chainErrorView{Index: i, ReceiptID: id, Error: "receipt not found"})
				continue
			}
			chain, at = append(chain, r), append(at, i)
		}
		checked, errs := receipt.VerifyChain(chain, s.receiptKey, false)
		out.Checked = checked
		for _, e := range errs {
			out.Errors = append(out.Errors, chainErrorView{at[e.Index], e.ReceiptID, e.Error})
		}
		slices.SortStableFunc(out.Errors, func(a, b chainErrorView) int { return cmp.Compare(a.Index, b.Index) })
		out.Valid = len(out.Errors) == 0
		return out, nil
	}
	from, to := int64(1), int64(0)
	if b.FromSeq != nil {
		if *b.FromSeq < 1 {
			return nil, invalidField("from_seq", "must be at least 1")
		}
		from = *b.FromSeq
	}
	if b.ToSeq != nil {
		if *b.ToSeq < from {
			return nil, invalidField("to_seq", "must not be below from_seq")
		}
		to = *b.ToSeq
	}
	return s.verifyRange(c, tenant, from, to)
}

// exportReceipts serves GET /receipts/export.
func (s *Server) exportReceipts(c *Call) (any, error) {
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	// The export ends at the stored chain head (the arbiter, advanced
	// in each writing transaction), and its header carries that head
	// rather than the last receipt found, so a receipt missing from
	// the end of the stored chain shows as a head mismatch offline.
	head, err := s.Store.ChainHead(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	var all []receipt.Receipt
	for from := int64(1); ; {
		rs, err := s.Store.ReceiptRange(c.Ctx(), c.Principal.TenantID, from, head.Seq, chainPage)
		if err != nil {
			return nil, err
		}
		all = append(all, toReceipts(rs)...)
		if len(rs) < chainPage {
			break
		}
		from = rs[len(rs)-1].Seq + 1
	}
	var buf bytes.Buffer
	if err := receipt.WriteExport(&buf, c.Principal.TenantID, s.ReceiptSigner, head, all); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// verifyRange verifies seq from..to (to 0: the head) page by page, carrying
// the previous receipt across pages so links are checked everywhere.
//
// A range that reaches the stored chain head (the default) must end at it:
// the head is read first and bounds the range (receipts committed after it
// are not part of this snapshot), and a chain that stops short of it, or
// whose last receipt is not the one the head records, is an error at the
// index after the last receipt checked. Without that, removing the newest
// receipts would leave a chain that verifies.
func (s *Server) verifyRange(c *Call, tenant string, from, to int64) (verifyChainView, error) {
	out := verifyChainView{Errors: []chainErrorView{}}
	head, err := s.Store.ChainHead(c.Ctx(), tenant)
	if err != nil {
		return out, err
	}
	toHead := head.Seq > 0 && (to == 0 || to >= head.Seq)
	if toHead {
		to = head.Seq
	}
	var prev *receipt.Receipt
	index := 0
	for seq := from; out.Checked < maxChainCheck; {
		rs, err := s.Store.ReceiptRange(c.Ctx(), tenant, seq, to, chainPage)
		if err != nil {
			return out, err
		}
		if len(rs) == 0 {
			break
		}
		page := toReceipts(rs)
		offset := 0
		if prev != nil {
			page = append([]receipt.Receipt{*prev}, page...)
			offset = 1
		}
		checked, errs := receipt.VerifyChain(page, s.receiptKey, from == 1 && prev == nil)
		out.Checked += checked - offset
		for _, e := range errs {
			if e.Index < offset {
				continue // the carried receipt was reported with its own page
			}
			out.Errors = append(out.Errors, chainErrorView{Index: index + e.Index - offset, ReceiptID: e.ReceiptID, Error: e.Error})
		}
		index += len(rs)
		last := page[len(page)-1]
		prev = &last
		if len(rs) < chainPage {
			break
		}
		seq = rs[len(rs)-1].Seq + 1
	}
	if toHead && out.Checked < maxChainCheck && head.Seq >= from {
		switch {
		case prev == nil || prev.Seq < head.Seq:
			last := from - 1
			if prev != nil {
				last = prev.Seq
			}
			out.Errors = append(out.Errors, chainErrorView{Index: index, Error: fmt.Sprintf(
				"receipts missing at the end: the chain stops at seq %d, its head is seq %d (receipt_hash %s)", last, head.Seq, head.Hash)})
		case prev.ReceiptHash != head.Hash:
			out.Errors = append(out.Errors, chainErrorView{Index: index - 1, ReceiptID: prev.ReceiptID, Error: fmt.Sprintf(
				"the last receipt (seq %d) is not the chain head: the head records receipt_hash %s", prev.Seq, head.Hash)})
		}
	}
	out.Valid = len(out.Errors) == 0
	return out, nil
}

func toReceipts(rs []persistence.Receipt) []receipt.Receipt { return viewAll(rs, viewReceipt) }
